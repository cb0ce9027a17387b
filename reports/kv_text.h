/* The terminal table of a record's KV section (what `xfprof kv` prints, and `xfprof show` of a kv
 * record): the pool's time-averaged breakdown per policy as shares of the pool and as shares of the
 * memory each policy holds, then throughput and latency. Pure: record in, text out. */
#ifndef XF_KV_TEXT_H
#define XF_KV_TEXT_H

#include "core/record.h"
#include "reports/sbuf.h"

/* Appends the table of r->kv to b (nothing when r has no KV section). */
void render_kv_table(sbuf *b, const record *r);

#endif
