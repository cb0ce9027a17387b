/* Test-only hooks, honoured where a command builds its record. Nothing but the tests and the
 * gate's benchmark sets them. */
#ifndef XF_CLI_TEST_HOOKS_H
#define XF_CLI_TEST_HOOKS_H

#include "core/record.h"

/* XFPROF_TEST_SLOW_OP=[phase/]op:factor (e.g. gate_up:1.3, or decode/ALL:1.1 written with a star for ALL): multiplies the time of
 * every op of kind `op` (every op for *), in `phase` only when given (prefill or decode), by
 * `factor` -- its time, its raw samples and, for a predicted op, its predicted time -- and adds
 * the difference to the step times and tokens/s it belongs to. Applied once per record (the env
 * key test_slow_op marks it: a sweep reading a run's record leaves it alone). Unset or empty:
 * nothing. A malformed value: XF_EINVAL naming it. */
xf_status cli_test_slow_op(record *r);

#endif
