/* Placeholder until the KV section lands (helper kv replaces this file). */
#include "record_kv_json.h"

#include <stdlib.h>

#include "core/json_util.h"

cJSON *record_kv_to_json(const record_kv *kv) {
    cJSON *o = cJSON_CreateObject();
    if (o && !json_add_number(o, "n_policies", kv->n_policies)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

xf_status record_kv_from_json(const cJSON *j, const char *ctx, record_kv **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return xf_errorf(XF_ENOMEM, "%s: out of memory", ctx);
    int64_t n;
    return json_get_int(j, "n_policies", ctx, 0, 1000, &n);
}
