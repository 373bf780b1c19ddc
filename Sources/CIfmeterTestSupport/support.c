#ifdef __linux__
#include "CIfmeterTestSupport.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <malloc.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

_Static_assert(sizeof(struct ifreq) <= CIFM_TUN_REQUEST_SIZE, "CIFM_TUN_REQUEST_SIZE is too small");

unsigned long cifm_tunsetiff(void) { return TUNSETIFF; }

void cifm_tun_request(void *out, const char *name, int tap) {
    struct ifreq *ifr = out;
    memset(ifr, 0, sizeof *ifr);
    ifr->ifr_flags = (tap ? IFF_TAP : IFF_TUN) | IFF_NO_PI;
    strncpy(ifr->ifr_name, name, IFNAMSIZ - 1);
}

int cifm_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int cifm_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

size_t cifm_usable_size(const void *block) { return malloc_usable_size((void *)block); }
#endif
