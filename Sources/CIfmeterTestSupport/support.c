#ifdef __linux__
#include "CIfmeterTestSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

int cifm_tun_open(const char *name, int tap) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = (tap ? IFF_TAP : IFF_TUN) | IFF_NO_PI;
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

extern char **environ;

int cifm_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

static void cifm_stdio(posix_spawn_file_actions_t *actions, int fd, int target, int mode) {
    if (fd < 0)
        posix_spawn_file_actions_addopen(actions, target, "/dev/null", mode, 0);
    else
        posix_spawn_file_actions_adddup2(actions, fd, target);
}

int cifm_spawn(char *const argv[], int in_fd, int out_fd, int err_fd, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    cifm_stdio(&actions, in_fd, 0, O_RDONLY);
    cifm_stdio(&actions, out_fd, 1, O_WRONLY);
    cifm_stdio(&actions, err_fd, 2, O_WRONLY);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawnp(pid, argv[0], &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    return rc;
}

size_t cifm_usable_size(const void *block) { return malloc_usable_size((void *)block); }
#endif
