/* The command table. Each subcommand lives in cmd_<name>.c; add one line here per command. */
#include "cli.h"

int cmd_predict(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_kv(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_machine(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_merge(int argc, char **argv);

const cli_command cli_commands[] = {
    {"predict", "cost model against a device's roofline: FLOPs, bytes, bound, TTFT, TPOT, memory", cmd_predict},
    {"models", "list the built-in model presets with parameters and KV bytes per token", cmd_models},
    {"devices", "list the device spec sheets with their ridge points", cmd_devices},
    {"kv", "KV cache policies under simulated serving: token states vs. reserved and fragmented memory", cmd_kv},
    {"show", "render a saved record again (table, csv, md, json) without rerunning", cmd_show},
    {"report", "render records as one self-contained HTML report (or md) and a Chrome trace", cmd_report},
    {"run", "run the reference model op by op under the probes: measured vs predicted, TTFT, TPOT, tokens/s", cmd_run},
    {"machine", "measure this CPU's bandwidth and FLOP/s ceilings and save them for run and predict", cmd_machine},
    {"compare", "the CI regression gate: two builds interleaved (--ab) or two records; headline metrics decide", cmd_compare},
    {"import", "another engine's trace (torch.profiler) as a record: measured time, FLOPs, bytes, class of every op", cmd_import},
    {"sweep", "every combination of the list flags, predicted or measured, checkpointed to JSONL (--resume)", cmd_sweep},
    {"merge", "join the JSONL files of a sharded sweep (sweep --shard i/n) into the whole sweep's record", cmd_merge},
};
const int cli_command_count = (int)(sizeof cli_commands / sizeof cli_commands[0]);
