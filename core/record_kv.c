#include "record_kv.h"

#include <stdlib.h>

void record_kv_free(record_kv *kv) { free(kv); }
