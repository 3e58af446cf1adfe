// The commands of the command line: for each, its options and help
// (XxxCommand) and what it runs on them (Xxx); main.cc dispatches.
#pragma once

#include "tools/cli/options.h"

namespace attnpool_cli {

Command PoolCommand();  // pool.cc
int Pool(const Arguments& arguments);

Command DistancesCommand();  // distances.cc
int Distances(const Arguments& arguments);

Command RegressCommand();  // regress.cc
int Regress(const Arguments& arguments);

Command SdpaCommand();  // layers.cc
int Sdpa(const Arguments& arguments);

Command AdditiveCommand();  // layers.cc
int Additive(const Arguments& arguments);

Command MhaCommand();  // layers.cc
int Mha(const Arguments& arguments);

int Targets();  // targets.cc: no options

}  // namespace attnpool_cli
