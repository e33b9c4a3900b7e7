// DFLASH_SM90A_TARGET: 1 while nvcc compiles device code for sm_90a (the "a" features: wgmma,
// and the TMA / mbarrier instructions the warpgroup kernel uses with them), else 0. The wrappers
// in wgmma_sm90.h and tma_sm90.h emit their instructions only then and trap otherwise, so the
// warpgroup kernel's template compiles into every image (sm_80, sm_89, sm_90 PTX) while only the
// sm_90a one can run it; the launch code selects it only there (AttentionWgmmaRuns()).
#pragma once

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DFLASH_SM90A_TARGET 1
#else
#define DFLASH_SM90A_TARGET 0
#endif
