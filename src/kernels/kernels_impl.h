/* kernels_impl.h — private glue between the kernel tables (ref.c, x86_*.c, arm_neon.c) and
 * dispatch.c. Each SIMD file overwrites the slots it accelerates in a table that starts as a
 * copy of the reference table (AVX-512: of the AVX2 table). */
#ifndef DF_KERNELS_IMPL_H
#define DF_KERNELS_IMPL_H
#include "kernels/kernels.h"

void df_kernels_fill_ref(df_kernel_table *t);
#if defined(__x86_64__)
void df_kernels_fill_avx2(df_kernel_table *t);
void df_kernels_fill_avx512(df_kernel_table *t);
#endif
#if defined(__aarch64__)
void df_kernels_fill_neon(df_kernel_table *t);
#endif
#endif
