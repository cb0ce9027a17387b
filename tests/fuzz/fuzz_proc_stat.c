/* libFuzzer harness: two /proc/stat texts (the input split at its first NUL, or in halves) ->
 * omp_spin_idle_cpus (own ticks from the first byte), whose result must be -1 or within [0, ncpu], and the spin
 * chosen for that one window, which must be the long one exactly when the window counts as free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probes/omp_spin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t head = data[0];
    int ncpu = head % 20; /* 0 is refused */
    data++, size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t n0 = nul ? (size_t)(nul - data) : size / 2, off1 = nul ? n0 + 1 : n0;
    char *a = malloc(n0 + 1), *b = malloc(size - off1 + 1);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memcpy(a, data, n0);
    a[n0] = 0;
    memcpy(b, data + off1, size - off1);
    b[size - off1] = 0;
    double idle = omp_spin_idle_cpus(a, b, ncpu, (double)(head / 20 % 8) * 25);
    if (!(idle == -1 || (idle >= 0 && idle <= ncpu))) abort();
    if (omp_spin_window_free(idle, ncpu) != !strcmp(omp_spin_for_windows(&idle, 1, ncpu), OMP_SPIN_LONG)) abort();
    free(a);
    free(b);
    return 0;
}
