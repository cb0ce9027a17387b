/* What NCCL's collectives need of the CUDA runtime on one rank (runner/comm_nccl.h): the node's
 * device count, a stream on the rank's device, the stream's completion, device buffers. Built on
 * the CUDA runtime where the toolkit was found (XFPROF_HAVE_CUDA); elsewhere every call is
 * XF_EUNSUPPORTED saying so. Compiled here; not yet run on a GPU (docs/parallel.md). */
#ifndef XF_CUDA_COMM_H
#define XF_CUDA_COMM_H

#include <stddef.h>

#include "core/status.h"

/* GPUs this process sees (cudaGetDeviceCount); XF_EUNSUPPORTED with the reason when none. */
xf_status cuda_comm_device_count(int *n);

/* Makes `device` current and creates a non-blocking stream on it (*stream: cudaStream_t, the
 * caller's: cuda_comm_stream_free). */
xf_status cuda_comm_stream_new(int device, void **stream);
void cuda_comm_stream_free(void *stream); /* NULL fine */

/* 1 when the stream's work is done, 0 not yet, -1 an error (message set): comm_nccl_stream's query. */
int cuda_comm_stream_query(void *ctx, void *stream);

/* bytes of device memory (*dev the caller's: cuda_comm_free), filled from host memory src (NULL:
 * left unset). */
xf_status cuda_comm_alloc(size_t bytes, const void *src, void **dev);
void cuda_comm_free(void *dev); /* NULL fine */

/* bytes of device memory dev into host memory dst (synchronous). */
xf_status cuda_comm_download(void *dst, const void *dev, size_t bytes);

#endif
