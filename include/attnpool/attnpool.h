// attnpool — SIMD kernels for attention pooling by similarity.
// The one header a user includes.
#pragma once

#include <attnpool/attention.h>
#include <attnpool/distance.h>
#include <attnpool/element.h>
#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/kernel.h>
#include <attnpool/normalize.h>
#include <attnpool/pool.h>
#include <attnpool/matrix.h>
#include <attnpool/regression.h>
#include <attnpool/targets.h>
#include <attnpool/version.h>
#include <attnpool/weighted_sum.h>
