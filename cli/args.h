/* Parsing of option values: comma lists, ranges and byte sizes. Every list flag of every
 * command takes these forms, as llama-bench's do. */
#ifndef XF_ARGS_H
#define XF_ARGS_H

#include <stdint.h>

#include "core/status.h"
#include "reference_model/kv_cache.h"

/* Integer list: "1,8,64", ranges "1..64" (doubling), "128..2048*2" (multiply by 2),
 * "0..100+25" (add 25), mixed with commas. Every value must lie in [lo, hi]; at most 4096
 * values. *out is freed by the caller with free(). Messages name `flag`. */
xf_status args_int_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t **out, int *n);

/* Comma-separated strings; empty items refused. *out (and each string) freed with
 * args_str_list_free. */
xf_status args_str_list(const char *flag, const char *s, char ***out, int *n);
void args_str_list_free(char **list, int n);

/* A byte size: "20GiB", "512MiB", "1.5GB", "4096", "2e9". Binary (KiB, MiB, GiB, TiB) and
 * decimal (KB, MB, GB, TB) suffixes. */
xf_status args_size(const char *flag, const char *s, double *bytes);

/* A whole number in [lo, hi]. */
xf_status args_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);

/* A finite number in [lo, hi]. */
xf_status args_double(const char *flag, const char *s, double lo, double hi, double *out);

/* The shared flags of core/limits.h: the bounds come from the one table, so every command
 * accepts the same values for the same flag. XF_EINVAL for a flag the table lacks. */
xf_status args_flag_int(const char *flag, const char *s, int64_t *out);
xf_status args_flag_list(const char *flag, const char *s, int64_t **out, int *n);

/* A KV policy ("reserve", "pow2", "oracle", "paged", "paged:B"): kv_policy_parse with the flag
 * named in the message. */
xf_status args_kv_policy(const char *flag, const char *s, kv_policy *out);

/* A form of latent attention: "naive" -> 0, "absorbed" -> 1 (model_config.mla_absorbed); XF_EINVAL
 * naming the flag and the two forms otherwise. */
xf_status args_mla_form(const char *flag, const char *s, int *out);

/* The listing commands' format: "table" -> 0, "json" -> 1; XF_EINVAL naming the flag and the two
 * formats otherwise. */
xf_status args_table_or_json(const char *flag, const char *s, int *json);

#endif
