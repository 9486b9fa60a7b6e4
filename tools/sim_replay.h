/* tools/sim_replay.h — tessera-sim's lab commands (sim_replay.c): `replay`
 * and `convert`, each called with its own argv (argv[0] the command's
 * name). Return the program's exit status; never abort on a bad file. */
#ifndef TESSERA_TOOLS_SIM_REPLAY_H
#define TESSERA_TOOLS_SIM_REPLAY_H

int sim_replay(int argc, char **argv);
int sim_convert(int argc, char **argv);

#endif
