/* Op kinds: record names, parsing, classes of op. */
#include "core/op.h"

#include <string.h>

static const char *const k_op_names[OP_KIND_COUNT] = {
    "embedding", "attn_norm", "qkv",          "rope",     "kv_append", "attention",
    "o_proj",    "attn_residual", "ffn_norm", "gate_up",  "swiglu",    "down",
    "ffn_residual", "final_norm", "lm_head",  "sampling", "kv_alloc", "other",
    "all_reduce", "all_gather", "all_to_all", "send_recv",
};

const char *op_kind_name(op_kind k) { return (k >= 0 && k < OP_KIND_COUNT) ? k_op_names[k] : "?"; }

xf_status op_kind_parse(const char *s, op_kind *out) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        if (s && strcmp(s, k_op_names[k]) == 0) {
            *out = (op_kind)k;
            return XF_OK;
        }
    }
    return xf_errorf(XF_EINVAL,
                     "unknown op '%.48s': expected one of embedding, attn_norm, qkv, rope, kv_append, attention, "
                     "o_proj, attn_residual, ffn_norm, gate_up, swiglu, down, ffn_residual, final_norm, lm_head, "
                     "sampling, kv_alloc, other, all_reduce, all_gather, all_to_all, send_recv",
                     s ? s : "");
}

int op_kind_is_per_layer(op_kind k) { return k >= OP_ATTN_NORM && k <= OP_FFN_RESIDUAL; }

int op_kind_is_gemm(op_kind k) {
    return k == OP_QKV || k == OP_O_PROJ || k == OP_GATE_UP || k == OP_DOWN || k == OP_LM_HEAD;
}

int op_kind_is_comm(op_kind k) { return k == OP_ALL_REDUCE || k == OP_ALL_GATHER || k == OP_ALL_TO_ALL || k == OP_SEND_RECV; }
