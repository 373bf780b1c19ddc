#ifndef IFMETER_CCAIRO_SHIM_H
#define IFMETER_CCAIRO_SHIM_H
#include <cairo/cairo.h>
#endif
