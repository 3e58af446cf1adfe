// attnpool — SIMD kernels for attention pooling by similarity.
// The one header a user includes.
#pragma once

#include <attnpool/distance.h>
#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/matrix.h>
#include <attnpool/targets.h>
