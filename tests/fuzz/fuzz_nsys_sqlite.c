/* libFuzzer harness: any bytes as an Nsight Systems SQLite export (written to a temporary file,
 * as SQLite reads files) -> import_nsys_sqlite_file; what imports must read back
 * (fuzz_import_check.h). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_import_check.h"
#include "importers/importer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/xf_fuzz_nsysXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    record r;
    if (import_nsys_sqlite_file(path, NULL, &r, NULL) == XF_OK) fuzz_import_check(&r);
    record_free(&r);
    unlink(path);
    return 0;
}
