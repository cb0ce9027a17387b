/* FLOPs and compulsory bytes of one PyTorch op from what a torch.profiler trace records with
 * record_shapes=True: "Input Dims", "Input type" and "Concrete Inputs". Pure functions of those
 * fields; the op list and its formulas are docs/import.md's table. */
#ifndef XF_TORCH_OPS_H
#define XF_TORCH_OPS_H

#include <stdint.h>

#define TORCH_MAX_INPUTS 16
#define TORCH_MAX_DIMS 8
#define TORCH_MAX_CONCRETE 10

/* One entry of "Input Dims" / "Input type". */
typedef struct torch_input {
    int ndim;                      /* -1: not a tensor (Scalar, None, "") */
    int64_t dims[TORCH_MAX_DIMS];  /* (ndim) sizes */
    int elem_bytes;                /* bytes of one element from "Input type"; 0 unknown */
    int is_list;                   /* a TensorList: list_elems holds the summed elements */
    double list_elems;             /* TensorList: sum of its tensors' elements */
    int64_t list_last_dim0;        /* TensorList: last dim of its first tensor, -1 none */
    int list_same_last;            /* TensorList: 1 when every tensor has the same last dim */
} torch_input;

typedef struct torch_op_args {
    int n_inputs;                             /* entries of `in` filled (at most TORCH_MAX_INPUTS) */
    int truncated;                            /* 1: the op had more inputs or dims than kept */
    torch_input in[TORCH_MAX_INPUTS];         /* (n_inputs) */
    int n_concrete;
    char concrete[TORCH_MAX_CONCRETE][8];     /* (n_concrete) the first "Concrete Inputs", truncated */
} torch_op_args;

typedef enum torch_op_class {
    TORCH_OP_UNKNOWN = 0, /* no formula: time kept, class unknown */
    TORCH_OP_FREE,        /* views, allocation, metadata: no FLOPs, no traffic */
    TORCH_OP_MATRIX,      /* mm, addmm, bmm, baddbmm, matmul, linear */
    TORCH_OP_ATTENTION,   /* the scaled_dot_product_attention variants */
    TORCH_OP_ELEMENTWISE, /* element-wise math, norms, softmax, reductions */
    TORCH_OP_MOVE         /* copy_, cat, to, embedding, index ops: traffic only */
} torch_op_class;

typedef struct torch_op_cost {
    torch_op_class cls;
    double flops;     /* a multiply-add counts 2 */
    double bytes;     /* inputs read + output written, TensorList parts excluded */
    double list_elems;/* elements of TensorList inputs read and written: bytes once their dtype is known */
    int elem_bytes;   /* element size of the op's first tensor input (0 none) */
    int64_t q_len;    /* attention: query length (dim -2 of q), else 0 */
    int64_t kv_len;   /* attention: key length, else 0 */
    int is_cat_last;  /* aten::cat of tensors along the last dim (rotate_half), else 0 */
} torch_op_cost;

/* Bytes of one element of a trace's "Input type" ("float" 4, "c10::BFloat16" 2, "long int" 8,
 * "bool" 1, ...); 0 for what is not a tensor type ("Scalar", "", "TensorList"). */
int torch_type_bytes(const char *type);

/* The cost of op `name` ("aten::mm") with these inputs. An op without a formula gets
 * cls TORCH_OP_UNKNOWN and zeros; so does a known op whose inputs do not have the shapes its
 * formula needs (e.g. no dims recorded). */
void torch_op_cost_of(const char *name, const torch_op_args *a, torch_op_cost *out);

#endif
