#ifdef __linux__
#include "CIfmeterLinux.h"

#include <string.h>
#include <sys/ioctl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

int cifm_ethtool_link(int fd, const char *name, int32_t *speed, uint8_t *duplex) {
    struct ethtool_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.cmd = ETHTOOL_GSET;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    ifr.ifr_data = (void *)&cmd;
    if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
        return -1;
    *speed = (int32_t)ethtool_cmd_speed(&cmd);
    *duplex = cmd.duplex;
    return 0;
}
#endif
