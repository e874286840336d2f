// Stand-in for cuda_runtime_api.h: the emulated API lives in cuda_runtime.h.
#pragma once

#include "cuda_runtime.h"
