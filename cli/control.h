/* The daemon's control socket; see control.c for the protocol. */
#ifndef HSM_CONTROL_H
#define HSM_CONTROL_H

#include "crawl.h"
#include "tree.h"

#include <sys/un.h>

typedef struct HsmControl HsmControl;

char *hsm_control_socket_path(const char *cache_dir);
/* Fills addr with a name for the socket of cache_dir that fits whatever the
 * length of cache_dir (through /proc/self/fd); *dir_fd must stay open while
 * addr is used.  FALSE with errno set if cache_dir cannot be opened. */
gboolean hsm_control_address(const char *cache_dir, struct sockaddr_un *addr, int *dir_fd);
HsmControl *hsm_control_start(HsmTree *tree, GError **err);
/* The crawl whose progress `status` of the root shows (NULL: none). */
void hsm_control_set_crawl(HsmControl *control, HsmCrawl *crawl);
void hsm_control_stop(HsmControl *control);

#endif
