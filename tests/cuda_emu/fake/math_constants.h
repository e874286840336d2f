// Stand-in for math_constants.h: the CUDART_* constants the kernels use.
#pragma once

#include <limits>

#define CUDART_INF (std::numeric_limits<double>::infinity())
#define CUDART_INF_F (std::numeric_limits<float>::infinity())
#define CUDART_NAN (std::numeric_limits<double>::quiet_NaN())
#define CUDART_NAN_F (std::numeric_limits<float>::quiet_NaN())
#define CUDART_PI_F 3.141592654f
