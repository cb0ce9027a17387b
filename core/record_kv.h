/* The record's KV section: the serving simulator's results per allocation policy.
 * Owned by the KV issue; filled by `xfprof kv`. */
#ifndef XF_RECORD_KV_H
#define XF_RECORD_KV_H

typedef struct record_kv {
    int n_policies; /* placeholder until the KV section lands */
} record_kv;

/* Frees everything the section owns and the section itself. NULL is fine. */
void record_kv_free(record_kv *kv);

#endif
