// The commands of the command line: each with its options, its help and
// what it runs on them (Command::run); main.cc dispatches.
#pragma once

#include "tools/cli/options.h"

namespace attnpool_cli {

Command PoolCommand();       // pool.cc
Command DistancesCommand();  // distances.cc
Command RegressCommand();    // regress.cc
Command SdpaCommand();       // layers.cc
Command AdditiveCommand();   // layers.cc
Command MhaCommand();        // layers.cc

int Targets();  // targets.cc: no options

}  // namespace attnpool_cli
