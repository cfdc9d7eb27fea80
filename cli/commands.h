/* The verbs of the httphsm command; each returns the process exit status. */
#ifndef HSM_COMMANDS_H
#define HSM_COMMANDS_H

int hsm_command_mount(int argc, char **argv);
int hsm_command_umount(int argc, char **argv);
int hsm_command_status(int argc, char **argv);
int hsm_command_prefetch(int argc, char **argv);
int hsm_command_evict(int argc, char **argv);
int hsm_command_unpin(int argc, char **argv);
int hsm_command_refresh(int argc, char **argv);

#endif
