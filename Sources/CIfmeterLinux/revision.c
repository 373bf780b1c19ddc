// The commit the binary was built from: `make` writes ifmeter_revision.h
// beside this file (scripts/write-revision, not committed); a build
// without it says "unknown".
#include "CIfmeterLinux.h"

#if __has_include("ifmeter_revision.h")
#include "ifmeter_revision.h"
#endif
#ifndef IFMETER_REVISION
#define IFMETER_REVISION "unknown"
#endif

const char *cifm_revision(void) { return IFMETER_REVISION; }
