#ifdef __linux__
#include "CIfmeterBench.h"

#include <linux/if_link.h>
#include <stdlib.h>
#include <string.h>

struct dump_request {
    struct nlmsghdr nh;
    union {
        struct if_stats_msg ifsm;
        struct ifinfomsg ifi;
    };
};
_Static_assert(sizeof(struct dump_request) <= CIFM_RAW_REQUEST_SIZE, "CIFM_RAW_REQUEST_SIZE is too small");

size_t cifm_raw_dump_request(void *out, uint32_t seq, int stats) {
    struct dump_request *req = out;
    memset(req, 0, sizeof *req);
    req->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req->nh.nlmsg_seq = seq;
    if (stats) {
        req->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct if_stats_msg));
        req->nh.nlmsg_type = RTM_GETSTATS;
        req->ifsm.family = AF_UNSPEC;
        req->ifsm.filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
    } else {
        req->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
        req->nh.nlmsg_type = RTM_GETLINK;
        req->ifi.ifi_family = AF_UNSPEC;
    }
    return req->nh.nlmsg_len;
}

long cifm_raw_parse_dump(const void *buf, size_t n, uint32_t seq, int stats, uint64_t *sum, int *done, int *error) {
    long count = 0;
    long left = (long)n;
    size_t hdr = stats ? sizeof(struct if_stats_msg) : sizeof(struct ifinfomsg);
    unsigned short want = stats ? IFLA_STATS_LINK_64 : IFLA_STATS64;
    for (const struct nlmsghdr *nh = buf; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
        if (nh->nlmsg_seq != seq)
            continue;
        if (nh->nlmsg_type == NLMSG_DONE) {
            *done = 1;
            return count;
        }
        if (nh->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *err = NLMSG_DATA(nh);
            *done = 1;
            *error = -err->error;
            return count;
        }
        const struct rtattr *rta = (const struct rtattr *)((const char *)NLMSG_DATA(nh) + NLMSG_ALIGN(hdr));
        int rlen = nh->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(hdr));
        for (; RTA_OK(rta, rlen); rta = RTA_NEXT(rta, rlen)) {
            if (rta->rta_type == want) {
                struct rtnl_link_stats64 s;
                memcpy(&s, RTA_DATA(rta), sizeof s);
                *sum += s.rx_bytes;
                break;
            }
        }
        count++;
    }
    return count;
}

long cifm_raw_count_link_events(const void *buf, size_t n) {
    long count = 0;
    long left = (long)n;
    for (const struct nlmsghdr *nh = buf; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left))
        if (nh->nlmsg_type == RTM_NEWLINK || nh->nlmsg_type == RTM_DELLINK)
            count++;
    return count;
}

long cifm_raw_parse_proc_net_dev(char *buf, size_t n, uint64_t *sum) {
    buf[n] = 0;
    long count = 0;
    uint64_t total = 0;
    char *line = buf;
    int lineno = 0;
    while (line && *line) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (lineno++ >= 2) {
            char *colon = strchr(line, ':');
            if (colon) {
                char *p = colon + 1;
                uint64_t v[16];
                for (int i = 0; i < 16; i++)
                    v[i] = strtoull(p, &p, 10);
                total += v[0];
                count++;
            }
        }
        line = next;
    }
    *sum = total;
    return count;
}
#endif
