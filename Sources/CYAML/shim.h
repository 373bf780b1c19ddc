#ifndef IFMETER_CYAML_SHIM_H
#define IFMETER_CYAML_SHIM_H
#include <yaml.h>
#endif
