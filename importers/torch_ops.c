/* FLOPs and compulsory bytes of PyTorch ops from their recorded input shapes (torch_ops.h).
 * Every formula here is listed in docs/import.md; an op not listed is TORCH_OP_UNKNOWN. */
#include "torch_ops.h"

#include <stdlib.h>
#include <string.h>

int torch_type_bytes(const char *t) {
    static const struct {
        const char *name;
        int bytes;
    } k[] = {{"float", 4},          {"double", 8},           {"c10::Half", 2},          {"c10::BFloat16", 2},
             {"long int", 8},       {"long", 8},             {"int", 4},                {"short int", 2},
             {"signed char", 1},    {"unsigned char", 1},    {"bool", 1},               {"c10::Float8_e4m3fn", 1},
             {"c10::Float8_e5m2", 1}, {"c10::Float8_e4m3fnuz", 1}, {"c10::Float8_e5m2fnuz", 1},
             {"c10::complex<float>", 8}, {"c10::complex<double>", 16}, {"c10::complex<c10::Half>", 4}};
    if (!t) return 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(t, k[i].name) == 0) return k[i].bytes;
    return 0;
}

static int in_list(const char *name, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (strcmp(name, list[i]) == 0) return 1;
    return 0;
}

/* Ops that neither compute nor move data themselves (views, allocation, metadata, and
 * wrappers whose work shows as children when there is any). */
static const char *const k_free[] = {
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::as_strided", "aten::t", "aten::transpose",
    "aten::permute", "aten::expand", "aten::expand_as", "aten::unsqueeze", "aten::squeeze", "aten::slice",
    "aten::select", "aten::narrow", "aten::alias", "aten::detach", "aten::detach_", "detach_", "detach",
    "aten::lift_fresh", "aten::lift", "aten::resolve_conj", "aten::resolve_neg", "aten::view_as", "aten::split",
    "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::empty", "aten::empty_strided", "aten::empty_like",
    "aten::resize_", "aten::result_type", "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense",
    "aten::scalar_tensor", "aten::contiguous", "aten::flatten", "aten::unflatten", "aten::_reshape_alias",
    "aten::to", "aten::numpy_T", "aten::movedim", "aten::set_", "aten::_has_compatible_shallow_copy_type",
    NULL};

/* Element-wise ops (and norms, softmax): FLOPs per output element. */
static const struct {
    const char *name;
    double flops;
} k_elementwise[] = {
    {"aten::add", 1},   {"aten::add_", 1},       {"aten::sub", 1},        {"aten::sub_", 1},      {"aten::rsub", 1},
    {"aten::mul", 1},   {"aten::mul_", 1},       {"aten::div", 1},        {"aten::div_", 1},      {"aten::neg", 1},
    {"aten::pow", 1},   {"aten::rsqrt", 1},      {"aten::sqrt", 1},       {"aten::exp", 1},       {"aten::log", 1},
    {"aten::reciprocal", 1}, {"aten::abs", 1},   {"aten::cos", 1},        {"aten::sin", 1},       {"aten::tanh", 1},
    {"aten::sigmoid", 1}, {"aten::clamp", 1},    {"aten::clamp_", 1},     {"aten::maximum", 1},   {"aten::minimum", 1},
    {"aten::eq", 1},    {"aten::ne", 1},         {"aten::lt", 1},         {"aten::le", 1},        {"aten::gt", 1},
    {"aten::ge", 1},    {"aten::where", 1},      {"aten::bitwise_or", 1}, {"aten::bitwise_and", 1},
    {"aten::bitwise_not", 1}, {"aten::__or__", 1}, {"aten::__and__", 1},  {"aten::logical_not", 1},
    {"aten::logical_and", 1}, {"aten::logical_or", 1}, {"aten::masked_fill", 1}, {"aten::masked_fill_", 1},
    {"aten::fill_", 0}, {"aten::zero_", 0},      {"aten::silu", 4},       {"aten::silu_", 4},     {"aten::gelu", 8},
    {"aten::gelu_", 8}, {"aten::relu", 1},       {"aten::relu_", 1},      {"aten::softmax", 5},   {"aten::_softmax", 5},
    {"aten::log_softmax", 5}, {"aten::_log_softmax", 5}, {"aten::rms_norm", 4}, {"aten::_fused_rms_norm", 4},
    {"aten::layer_norm", 8}, {"aten::native_layer_norm", 8}, {"aten::isin", 1}, {"aten::triu", 0},
    {"aten::tril", 0},
};

/* Reductions over the last dimension: FLOPs per input element; output = input / last dim. */
static const char *const k_reduce[] = {"aten::mean", "aten::sum", "aten::amax", "aten::max", "aten::argmax",
                                       "aten::any", "aten::all", "aten::cumsum", "aten::amin", "aten::min",
                                       "aten::argmin", NULL};

/* The attention variants and the index of their is_causal argument in "Concrete Inputs". */
static const struct {
    const char *name;
    int causal_arg;
} k_attention[] = {
    {"aten::scaled_dot_product_attention", 5},
    {"aten::_scaled_dot_product_flash_attention", 4},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", 4},
    {"aten::_scaled_dot_product_efficient_attention", 6},
    {"aten::_scaled_dot_product_cudnn_attention", 6},
    {"aten::_scaled_dot_product_attention_math", 5},
    {"aten::_scaled_dot_product_fused_attention_overrideable", 5},
};

static double elems(const torch_input *t) {
    if (t->ndim < 0) return 0.0;
    double n = 1.0;
    for (int i = 0; i < t->ndim; i++) n *= (double)t->dims[i];
    return n;
}

static double tensor_bytes(const torch_input *t) { return t->ndim < 0 ? 0.0 : elems(t) * t->elem_bytes; }

static int is_tensor(const torch_input *t) { return t->ndim >= 0 && !t->is_list && t->elem_bytes > 0; }

/* Sum of the bytes of every tensor input. */
static double inputs_bytes(const torch_op_args *a) {
    double b = 0.0;
    for (int i = 0; i < a->n_inputs; i++)
        if (is_tensor(&a->in[i])) b += tensor_bytes(&a->in[i]);
    return b;
}

static int first_tensor(const torch_op_args *a) {
    for (int i = 0; i < a->n_inputs; i++)
        if (is_tensor(&a->in[i])) return i;
    return -1;
}

/* Elements of the broadcast of every tensor input (numpy rules, right-aligned). 0 if none. */
static double broadcast_elems(const torch_op_args *a) {
    int64_t out[TORCH_MAX_DIMS];
    int nd = 0, any = 0;
    for (int i = 0; i < a->n_inputs; i++) {
        const torch_input *t = &a->in[i];
        if (!is_tensor(t)) continue;
        any = 1;
        if (t->ndim > nd) {
            for (int j = nd - 1; j >= 0; j--) out[j + (t->ndim - nd)] = out[j];
            for (int j = 0; j < t->ndim - nd; j++) out[j] = 1;
            nd = t->ndim;
        }
        for (int j = 0; j < t->ndim; j++) {
            int64_t d = t->dims[j];
            int o = j + (nd - t->ndim);
            if (d != 1 && (out[o] == 1 || d > out[o])) out[o] = d;
        }
    }
    if (!any) return 0.0;
    double n = 1.0;
    for (int j = 0; j < nd; j++) n *= (double)out[j];
    return n;
}

static int concrete_true(const torch_op_args *a, int i) { return i < a->n_concrete && strcmp(a->concrete[i], "True") == 0; }

/* Matrix ops: the shapes of a (..., m, k) and b (..., k, n). */
static int matrix_cost(const char *op, const torch_op_args *a, torch_op_cost *c) {
    const torch_input *x, *y, *bias = NULL;
    double batch = 1.0, m, k, n;
    if (strcmp(op, "mm") == 0 || strcmp(op, "bmm") == 0 || strcmp(op, "matmul") == 0) {
        if (a->n_inputs < 2) return 0;
        x = &a->in[0];
        y = &a->in[1];
    } else if (strcmp(op, "addmm") == 0 || strcmp(op, "baddbmm") == 0) {
        if (a->n_inputs < 3) return 0;
        bias = &a->in[0];
        x = &a->in[1];
        y = &a->in[2];
    } else if (strcmp(op, "linear") == 0) {
        if (a->n_inputs < 2) return 0;
        x = &a->in[0];
        y = &a->in[1]; /* weight (n, k) */
        if (!is_tensor(x) || !is_tensor(y) || x->ndim < 1 || y->ndim != 2) return 0;
        if (a->n_inputs > 2 && is_tensor(&a->in[2])) bias = &a->in[2];
        k = (double)x->dims[x->ndim - 1];
        n = (double)y->dims[0];
        if ((double)y->dims[1] != k) return 0;
        m = elems(x) / (k > 0 ? k : 1);
        c->flops = 2.0 * m * k * n + (bias ? m * n : 0.0);
        c->bytes = inputs_bytes(a) + m * n * x->elem_bytes;
        return 1;
    } else {
        return 0;
    }
    if (!is_tensor(x) || !is_tensor(y) || x->ndim < 1 || y->ndim < 1) return 0;
    m = x->ndim >= 2 ? (double)x->dims[x->ndim - 2] : 1.0;
    k = (double)x->dims[x->ndim - 1];
    n = y->ndim >= 2 ? (double)y->dims[y->ndim - 1] : 1.0;
    double ky = y->ndim >= 2 ? (double)y->dims[y->ndim - 2] : (double)y->dims[0];
    if (ky != k) return 0;
    /* Batch: the broadcast of the leading dims of both. */
    int lx = x->ndim - 2, ly = y->ndim - 2, l = lx > ly ? lx : ly;
    for (int i = 0; i < l; i++) {
        int ix = lx - l + i, iy = ly - l + i;
        double dx = ix >= 0 ? (double)x->dims[ix] : 1.0, dy = iy >= 0 ? (double)y->dims[iy] : 1.0;
        batch *= dx > dy ? dx : dy;
    }
    c->flops = 2.0 * batch * m * k * n + (bias ? batch * m * n : 0.0);
    c->bytes = inputs_bytes(a) + batch * m * n * x->elem_bytes;
    return 1;
}

void torch_op_cost_of(const char *name, const torch_op_args *a, torch_op_cost *c) {
    memset(c, 0, sizeof *c);
    c->cls = TORCH_OP_UNKNOWN;
    if (!name || !a) return;
    int f = first_tensor(a);
    c->elem_bytes = f >= 0 ? a->in[f].elem_bytes : 0;
    if (in_list(name, k_free)) {
        c->cls = TORCH_OP_FREE;
        return;
    }
    if (a->truncated) return; /* shapes not all kept: no formula applies */
    if (strncmp(name, "aten::", 6) == 0) {
        const char *op = name + 6;
        if (matrix_cost(op, a, c)) {
            c->cls = TORCH_OP_MATRIX;
            return;
        }
    }
    for (size_t i = 0; i < sizeof k_attention / sizeof k_attention[0]; i++) {
        if (strcmp(name, k_attention[i].name) != 0) continue;
        if (a->n_inputs < 3) return;
        const torch_input *q = &a->in[0], *k = &a->in[1], *v = &a->in[2];
        if (!is_tensor(q) || !is_tensor(k) || !is_tensor(v) || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) return;
        double b = (double)q->dims[0], h = (double)q->dims[1], tq = (double)q->dims[2], d = (double)q->dims[3];
        double tk = (double)k->dims[2], dv = (double)v->dims[3];
        double pairs = tq * tk;
        if (concrete_true(a, k_attention[i].causal_arg) && tq <= tk) pairs = tq * (tk - tq) + tq * (tq + 1.0) / 2.0;
        c->flops = 2.0 * b * h * pairs * (d + dv);
        c->bytes = inputs_bytes(a) + b * h * tq * dv * q->elem_bytes;
        c->q_len = q->dims[2];
        c->kv_len = k->dims[2];
        c->cls = TORCH_OP_ATTENTION;
        return;
    }
    for (size_t i = 0; i < sizeof k_elementwise / sizeof k_elementwise[0]; i++) {
        if (strcmp(name, k_elementwise[i].name) != 0) continue;
        if (f < 0) return;
        double out = broadcast_elems(a);
        int inplace = name[strlen(name) - 1] == '_';
        int out_bytes = c->elem_bytes;
        static const char *const cmp[] = {"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
                                          "aten::isin", "aten::logical_not", "aten::logical_and", "aten::logical_or", NULL};
        if (in_list(name, cmp)) out_bytes = 1;
        if (strcmp(name, "aten::fill_") == 0 || strcmp(name, "aten::zero_") == 0) {
            out = elems(&a->in[f]);
            c->bytes = out * c->elem_bytes; /* written only */
        } else if (inplace) {
            c->bytes = inputs_bytes(a) + tensor_bytes(&a->in[f]);
        } else {
            c->bytes = inputs_bytes(a) + out * out_bytes;
        }
        c->flops = k_elementwise[i].flops * out;
        c->cls = TORCH_OP_ELEMENTWISE;
        return;
    }
    if (in_list(name, k_reduce)) {
        if (f < 0) return;
        const torch_input *t = &a->in[f];
        double n = elems(t), last = t->ndim > 0 ? (double)t->dims[t->ndim - 1] : 1.0;
        double out = last > 0 ? n / last : 0.0;
        int ob = (strcmp(name, "aten::argmax") == 0 || strcmp(name, "aten::argmin") == 0) ? 8 : t->elem_bytes;
        c->flops = n;
        c->bytes = inputs_bytes(a) + out * ob;
        c->cls = TORCH_OP_ELEMENTWISE;
        return;
    }
    /* Data movement. */
    if (strcmp(name, "aten::copy_") == 0) {
        if (a->n_inputs < 2 || !is_tensor(&a->in[0]) || !is_tensor(&a->in[1])) return;
        c->bytes = tensor_bytes(&a->in[0]) + tensor_bytes(&a->in[1]);
        c->cls = TORCH_OP_MOVE;
        return;
    }
    if (strcmp(name, "aten::clone") == 0 || strcmp(name, "aten::_to_copy") == 0) {
        if (f < 0) return;
        c->bytes = 2.0 * tensor_bytes(&a->in[f]);
        c->cls = TORCH_OP_MOVE;
        return;
    }
    if (strcmp(name, "aten::cat") == 0 || strcmp(name, "aten::stack") == 0) {
        if (a->n_inputs < 1 || !a->in[0].is_list) return;
        c->list_elems = 2.0 * a->in[0].list_elems; /* read and written */
        c->is_cat_last = strcmp(name, "aten::cat") == 0 && a->n_concrete > 1 && strcmp(a->concrete[1], "-1") == 0;
        c->cls = TORCH_OP_MOVE;
        return;
    }
    if (strcmp(name, "aten::embedding") == 0) {
        if (a->n_inputs < 2 || !is_tensor(&a->in[0]) || !is_tensor(&a->in[1]) || a->in[0].ndim != 2) return;
        double rows = elems(&a->in[1]), row_bytes = (double)a->in[0].dims[1] * a->in[0].elem_bytes;
        c->bytes = 2.0 * rows * row_bytes + tensor_bytes(&a->in[1]);
        c->cls = TORCH_OP_MOVE;
        return;
    }
    if (strcmp(name, "aten::index_select") == 0) {
        if (a->n_inputs < 3 || !is_tensor(&a->in[0]) || !is_tensor(&a->in[2]) || a->n_concrete < 2) return;
        const torch_input *t = &a->in[0];
        char *end;
        long dim = strtol(a->concrete[1], &end, 10);
        if (*end || t->ndim < 1) return;
        if (dim < 0) dim += t->ndim;
        if (dim < 0 || dim >= t->ndim || t->dims[dim] <= 0) return;
        double out = elems(t) / (double)t->dims[dim] * elems(&a->in[2]);
        c->bytes = 2.0 * out * t->elem_bytes + tensor_bytes(&a->in[2]);
        c->cls = TORCH_OP_MOVE;
        return;
    }
    if (strcmp(name, "aten::gather") == 0) {
        if (a->n_inputs < 3 || !is_tensor(&a->in[0]) || !is_tensor(&a->in[2])) return;
        double out = elems(&a->in[2]);
        c->bytes = 2.0 * out * a->in[0].elem_bytes + tensor_bytes(&a->in[2]);
        c->cls = TORCH_OP_MOVE;
        return;
    }
}
