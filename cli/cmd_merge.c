/* xfprof merge: the shards of a sweep (`sweep --shard i/n --jsonl F`, one per job of a Slurm array
 * or a CI matrix) joined into the record the whole sweep writes: the same points in the same
 * order, the same advice, the same bytes. Every line names its grid and its index in it
 * (cli/sweep_line.h); merge refuses lines of other grids, builds or setups, overlapping shards and
 * missing points, naming them (cli/sweep_merge.c). The record streams from the inputs through the
 * sweep's own store (cli/sweep_store.c), so memory stays flat however many points; every output is
 * written to a temporary and renamed, so a failure leaves nothing half-written. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "core/fileio.h"
#include "sweep_file.h"
#include "sweep_line.h"
#include "sweep_merge.h"
#include "sweep_store.h"

static const char *CMD = "merge";

static void help(void) {
    printf("Usage: xfprof merge SHARD.jsonl... (-o FILE | --jsonl FILE)\n\n"
           "Joins the JSONL files of a sharded sweep ('xfprof sweep --shard i/n --jsonl SHARD.jsonl', one per job of\n"
           "a Slurm job array or a CI matrix) into the record the whole sweep writes: the same points in the same\n"
           "order, the same advice; its creation time is the latest of its points' (so the merge of a sweep's own\n"
           "--jsonl is byte for byte that sweep's -o record). The inputs\n"
           "may come in any order, shards of different counts may mix (1/2 with 2/4 and 4/4), and a file may be\n"
           "several shards concatenated. Refused, exit 2, naming what is wrong: lines of another grid (the axes\n"
           "that differ), another xfprof version, another model config or device for the same model and device\n"
           "names, a point given twice with other contents (overlapping shards), missing points (and the shards\n"
           "they belong to), an incomplete last line (a shard still running: finish it with --resume).\n"
           "A point given twice with the same bytes is kept once, so merging a merged --jsonl with any of its\n"
           "shards again gives the same bytes.\n\n"
           "  -o, --output FILE  the sweep record (JSON; '-' for stdout). A sweep over several models or devices\n"
           "                     writes one record per model and device, FILE with -MODEL-DEVICE before its\n"
           "                     extension, as 'sweep -o' does\n"
           "  --jsonl FILE       also (or only) the merged JSONL: every point's line once, in grid order\n\n"
           "Example (docs/cluster.md): sbatch --array=1-3 scripts/slurm-sweep.sh ... then\n"
           "         xfprof merge sweep-*.jsonl -o sweep.json --jsonl sweep.jsonl && xfprof report sweep.json -o sweep.html\n");
}

/* The merged JSONL: every point's line in grid order, written atomically. */
static xf_status write_jsonl(sweep_merge *m, const char *path) {
    file_stream fs;
    xf_status s = file_stream_open(&fs, path);
    for (int64_t k = 0; s == XF_OK && k < m->n_points; k++) {
        const char *text;
        size_t len;
        if ((s = sweep_merge_line(m, k, &text, &len)) == XF_OK) s = file_stream_write(&fs, text, len);
    }
    if (s) fs.status = fs.status ? fs.status : s;
    xf_status c = file_stream_close(&fs);
    return s ? s : c;
}

/* The record(s), as `sweep -o` writes them: one per (model, device), points through the store. */
static int write_records(sweep_merge *m, const char *out_path) {
    sweep_param *ps = NULL;
    char **models = NULL, **devices = NULL;
    int nm = 0, nd = 0, rc = CLI_EXIT_OK;
    unsigned char *done = NULL;
    sweep_store store;
    memset(&store, 0, sizeof store);
    store.spool = -1;
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    xf_status s = sweep_merge_params(m, &ps, &models, &nm, &devices, &nd);
    if (s == XF_OK && !(done = calloc((size_t)m->n_points, 1))) s = xf_errorf(XF_ENOMEM, "out of memory");
    if (s == XF_OK) s = sweep_store_init(&store, ps, m->n_points, nd, 0, tmpdir, out_path);
    for (int64_t k = 0; s == XF_OK && k < m->n_points; k++) {
        const char *text;
        size_t len;
        char key[SWEEP_KEY_LEN], ctx[160];
        record r;
        record_init(&r, "sweep");
        snprintf(ctx, sizeof ctx, "%.120s line %lld", m->paths[m->pts[k].file], (long long)m->pts[k].line);
        if ((s = sweep_merge_line(m, k, &text, &len)) == XF_OK && (s = sweep_line_parse(text, len, ctx, key, sizeof key, &r)) == XF_OK &&
            strcmp(key, ps[k].key) != 0)
            s = xf_errorf(XF_EIO, "%s changed while merging", ctx);
        if (s == XF_OK && (s = sweep_store_put(&store, ps, k, &r)) == XF_OK) done[k] = 1;
        record_free(&r);
    }
    sweep_shard whole = {1, 1};
    sweep_writer w = {CMD, {RENDER_JSON, out_path, 0, NULL, NULL}, 0, &store};
    if (s == XF_OK) rc = sweep_write_records(&w, ps, done, models, nm, devices, nd, &whole);
    if (s) rc = cli_fail(CMD, s);
    sweep_store_free(&store);
    free(done);
    free(ps);
    args_str_list_free(models, nm);
    args_str_list_free(devices, nd);
    return rc;
}

int cmd_merge(int argc, char **argv) {
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"jsonl", required_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out = NULL, *jsonl = NULL;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(); return CLI_EXIT_OK;
        case 'o': out = optarg; break;
        case 'j': jsonl = optarg; break;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    int n = argc - optind;
    if (n < 1) return cli_usage_error(CMD, "give the shards' JSONL files to merge");
    if (!out && !jsonl) return cli_usage_error(CMD, "give -o FILE (the record) or --jsonl FILE (the merged lines), or both");
    if (out && jsonl && strcmp(out, "-") == 0 && strcmp(jsonl, "-") == 0)
        return cli_usage_error(CMD, "-o - and --jsonl - would both go to stdout: give one a file");
    xf_status s = XF_OK;
    if ((out && (s = file_check_parent(out))) || (jsonl && (s = file_check_parent(jsonl)))) return cli_fail(CMD, s);
    sweep_merge m;
    if ((s = sweep_merge_scan(&m, (const char *const *)(argv + optind), n)) != XF_OK) {
        sweep_merge_free(&m);
        return cli_fail(CMD, s);
    }
    if (m.n_twice)
        fprintf(stderr, "xfprof %s: note: %lld lines were given twice with the same bytes: each point kept once\n", CMD,
                (long long)m.n_twice);
    int rc = CLI_EXIT_OK;
    if (jsonl) {
        if ((s = write_jsonl(&m, jsonl)) != XF_OK) rc = cli_fail(CMD, s);
        else if (strcmp(jsonl, "-") != 0)
            fprintf(stderr, "xfprof %s: wrote the %lld points' lines to %s\n", CMD, (long long)m.n_points, jsonl);
    }
    if (rc == CLI_EXIT_OK && out) rc = write_records(&m, out);
    sweep_merge_free(&m);
    return rc;
}
