#ifndef IFMETER_CNETLINK_SHIM_H
#define IFMETER_CNETLINK_SHIM_H
#include <netlink/netlink.h>
#include <netlink/msg.h>
#include <netlink/attr.h>
#include <netlink/socket.h>
#include <netlink/errno.h>
#endif
