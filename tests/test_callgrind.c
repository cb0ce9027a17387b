/* The callgrind probe's dump parser (probes/callgrind.h) on dumps in callgrind's combined format:
 * our labels become ranges, totals become values (trailing zeros left out by callgrind count as 0,
 * cache events sum into the two miss counters), a part still being written is not consumed,
 * malformed lines are refused naming the line; the test hook's spec is parsed or refused. The
 * probe itself under valgrind: tests/cli_callgrind.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "probes/callgrind.h"

typedef struct seen {
    int n;
    callgrind_part parts[8];
} seen;

static xf_status keep(void *ctx, const callgrind_part *p) {
    seen *s = ctx;
    if (s->n < 8) s->parts[s->n] = *p;
    s->n++;
    return XF_OK;
}

static const char HEADER[] = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd:  xfprof run\n";

Test(callgrind, label_round_trip) {
    probe_range r = {XF_DECODE, 3, OP_DOWN, 17}, back;
    char buf[96];
    callgrind_label(&r, buf, sizeof buf);
    char dump[512];
    snprintf(dump, sizeof dump, "%spart: 1\ndesc: Trigger: Client Request: %s\nevents: Ir\ntotals: 5\n", HEADER, buf);
    seen s = {0};
    size_t used;
    cr_assert_eq(callgrind_parse(dump, strlen(dump), keep, &s, &used), XF_OK);
    cr_assert_eq(s.n, 1);
    back = s.parts[0].range;
    cr_assert(s.parts[0].has_range);
    cr_assert_eq(back.phase, r.phase);
    cr_assert_eq(back.layer, r.layer);
    cr_assert_eq(back.kind, r.kind);
    cr_assert_eq(back.step, r.step);
    cr_assert_eq(used, strlen(dump));
}

Test(callgrind, totals_events_and_cache) {
    char dump[1024];
    snprintf(dump, sizeof dump,
             "%spart: 1\n\ndesc: I1 cache: 65536 B\ndesc: Trigger: Client Request: xfprof 0 -1 0 0\n\npositions: line\n"
             "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 8016 1001 1007 3 1 0 3 1\n\nfn=(1) main\n0 8007 1001 1001 1 1 0 1 1\n\n"
             "totals: 8007 1001 1001 1 2 4 8 16\n\npart: 2\ndesc: Trigger: Client Request: xfprof 1 2 9 3\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n"
             "totals: 16007 2001 2001\n\npart: 3\ndesc: Trigger: Program termination\nevents: Ir\ntotals: 0\n",
             HEADER);
    seen s = {0};
    size_t used;
    cr_assert_eq(callgrind_parse(dump, strlen(dump), keep, &s, &used), XF_OK);
    cr_assert_eq(s.n, 3);
    cr_assert_eq(s.parts[0].v[CALLGRIND_IR], 8007); /* totals, not summary */
    cr_assert_eq(s.parts[0].v[CALLGRIND_L1_MISSES], 1 + 2 + 4);
    cr_assert_eq(s.parts[0].v[CALLGRIND_LL_MISSES], 8 + 16); /* DLmw left out: 0 */
    cr_assert(s.parts[0].has_cache);
    cr_assert_eq(s.parts[0].range.layer, -1);
    cr_assert_eq(s.parts[1].v[CALLGRIND_IR], 16007);
    cr_assert_eq(s.parts[1].v[CALLGRIND_L1_MISSES], 0);
    cr_assert_eq(s.parts[1].range.kind, OP_GATE_UP);
    cr_assert_not(s.parts[2].has_range); /* program termination: not one of ours */
    cr_assert_eq(used, strlen(dump));
}

Test(callgrind, incomplete_part_is_left) {
    char dump[512];
    snprintf(dump, sizeof dump, "%spart: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1\nevents: Ir\ntotals: 10\n", HEADER);
    size_t whole = strlen(dump);
    strcat(dump, "part: 2\ndesc: Trigger: Client Request: xfprof 1 0 6 1\nevents: Ir\ntotals: 2"); /* no newline yet */
    seen s = {0};
    size_t used;
    cr_assert_eq(callgrind_parse(dump, strlen(dump), keep, &s, &used), XF_OK);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(used, whole, "consumed %zu, the complete parts end at %zu", used, whole);
    /* the rest arrives: parsing again from `used` completes part 2 */
    strcat(dump, "0\n");
    seen t = {0};
    size_t used2;
    cr_assert_eq(callgrind_parse(dump + used, strlen(dump) - used, keep, &t, &used2), XF_OK);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.parts[0].v[CALLGRIND_IR], 20);
}

Test(callgrind, malformed_refused) {
    const char *bad[] = {
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 99 1\nevents: Ir\ntotals: 1\n",  /* op out of range */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5\nevents: Ir\ntotals: 1\n",     /* no step */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1 x\nevents: Ir\ntotals: 1\n", /* trailing text */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1\nevents: Ir\ntotals: -4\n",  /* not a count */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1\nevents: Ir\ntotals: 1 2\n", /* more totals than events */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1\ntotals: 1\n",               /* no events line */
        "part: 1\ndesc: Trigger: Client Request: xfprof 1 0 5 1\nevents: Ir\ntotals: 99999999999999999999999\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        seen s = {0};
        size_t used;
        xf_status st = callgrind_parse(bad[i], strlen(bad[i]), keep, &s, &used);
        cr_assert_eq(st, XF_EPARSE, "case %zu: status %d", i, st);
        cr_assert(strstr(xf_error_msg(), "callgrind dump line"), "case %zu: %s", i, xf_error_msg());
        cr_assert_eq(s.n, 0, "case %zu", i);
    }
}

Test(callgrind, test_hook_spec) {
    callgrind_test_extra e;
    cr_assert_eq(callgrind_test_extra_parse("decode/down:5000", &e), XF_OK);
    cr_assert(e.on);
    cr_assert_eq(e.phase, XF_DECODE);
    cr_assert_eq(e.kind, OP_DOWN);
    cr_assert_eq(e.iters, 5000);
    const char *bad[] = {"decode/down", "decode:5", "middle/down:5", "decode/nosuch:5", "decode/down:0", "decode/down:5x", "", NULL};
    for (int i = 0; i < 8; i++) cr_assert_eq(callgrind_test_extra_parse(bad[i], &e), XF_EINVAL, "case %d", i);
}

Test(callgrind, not_under_valgrind) {
    /* Criterion's process is not under valgrind: the probe says so instead of half-working. */
    if (callgrind_running()) cr_skip_test("running under valgrind");
    callgrind_probe *p = (callgrind_probe *)1;
    xf_status s = callgrind_probe_init(2, 3, "/nonexistent", 0, NULL, &p);
    cr_assert_eq(s, XF_EUNSUPPORTED);
    cr_assert_null(p);
    callgrind_probe_fill(NULL, NULL); /* NULL probe: nothing */
    callgrind_probe_free(NULL);
}
