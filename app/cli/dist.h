/* dist.h — the CLI under an MPI launcher (docs/distributed.md): every rank runs the same
 * command line; rank 0 runs the command, the others serve their share of the experts.
 * Single-process runs (no launcher, or a build without MPI) pass straight through. */
#ifndef DF_CLI_DIST_H
#define DF_CLI_DIST_H
#include <stdbool.h>
#include <stdio.h>
#include "deltafin.h"

/* Takes the --dist-* flags out of the subcommand's argv (argv[0] is the subcommand), joins
 * the MPI job when there is one, and on ranks > 0 runs the worker with the command line's
 * model flags: returns its exit status (>= 0). Returns -1 where the command itself runs. */
int df_cli_dist_start(int *argc, char **argv);
/* Leaves the job (stopping the workers, or aborting it after a fault); returns status. */
int df_cli_dist_end(int status);
/* Rank 0 of a distributed run: prints the communication and per-rank statistics to f (NULL:
 * nothing printed) and adds them as "dist" to json (a cJSON object, NULL: none). A no-op for a
 * model whose experts are not distributed. */
void df_cli_dist_report(deltafin_model *m, FILE *f, void *json);
#endif
