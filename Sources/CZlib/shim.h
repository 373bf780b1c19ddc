#ifndef IFMETER_CZLIB_SHIM_H
#define IFMETER_CZLIB_SHIM_H
#include <zlib.h>
#endif
