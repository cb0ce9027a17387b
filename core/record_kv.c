#include "record_kv.h"

#include <stdlib.h>
#include <string.h>

const double record_kv_pcts[RECORD_KV_PCT_COUNT] = {0.50, 0.90, 0.99};

const char *kv_category_name(kv_category c) {
    switch (c) {
    case KV_CAT_TOKEN: return "token_states";
    case KV_CAT_RESERVED: return "reserved";
    case KV_CAT_INTERNAL: return "internal";
    case KV_CAT_EXTERNAL: return "external";
    case KV_CAT_FREE: return "free";
    default: return "?";
    }
}

void record_kv_policy_clear(record_kv_policy *p) {
    if (!p) return;
    free(p->req_ttft_s);
    free(p->req_tpot_s);
    free(p->series);
    p->req_ttft_s = p->req_tpot_s = NULL;
    p->series = NULL;
    p->n_series = p->n_requests_kept = 0;
}

void record_kv_free(record_kv *kv) {
    if (!kv) return;
    for (int i = 0; i < kv->n_policies; i++) record_kv_policy_clear(&kv->policies[i]);
    free(kv->policies);
    free(kv);
}
