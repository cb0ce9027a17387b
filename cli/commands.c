/* The command table. Each subcommand lives in cmd_<name>.c; add one line here per command. */
#include "cli.h"

int cmd_predict(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_show(int argc, char **argv);

const cli_command cli_commands[] = {
    {"predict", "cost model against a device's roofline: FLOPs, bytes, bound, TTFT, TPOT, memory", cmd_predict},
    {"models", "list the built-in model presets with parameters and KV bytes per token", cmd_models},
    {"devices", "list the device spec sheets with their ridge points", cmd_devices},
    {"show", "render a saved record again (table, csv, md, json) without rerunning", cmd_show},
};
const int cli_command_count = (int)(sizeof cli_commands / sizeof cli_commands[0]);
