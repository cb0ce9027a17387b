/* The router's load in a measured mixture-of-experts point (record_point.expert_tokens): how many
 * distinct experts a step read, how uneven the tokens were spread over the experts. Pure functions
 * of the record, for the reports' expert-load chart and the advice. */
#ifndef XF_EXPERTS_H
#define XF_EXPERTS_H

#include <stdint.h>

#include "core/record.h"

typedef struct experts_load {
    int64_t steps;            /* steps of the phase summed */
    int64_t moe_layers;       /* layers with routed tokens */
    int64_t tokens;           /* routed (token, expert) pairs per step and layer: tokens x top-k */
    double distinct_per_step; /* distinct experts read per step, mean over the MoE layers */
    double max_over_mean;     /* over the MoE layers, the largest (busiest expert's tokens) / (mean per expert) */
    int worst_layer;          /* the layer of max_over_mean */
    int64_t hot_expert;       /* its busiest expert */
    double hot_share;         /* that expert's share of the layer's routed tokens */
    double idle_share;        /* experts no token chose, share over all MoE layers' experts */
} experts_load;

/* Fills *out for phase ph of p; 1 when p has router statistics with at least one step and one MoE
 * layer in that phase, 0 (and *out zeroed) otherwise. */
int experts_load_of(const record *r, const record_point *p, xf_phase ph, experts_load *out);

#endif
