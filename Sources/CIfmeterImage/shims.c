#include "CIfmeterImage.h"

#include <dlfcn.h>
#include <stdio.h>

static cifm_cairo_functions cairo;
static int loaded;
// In the order of the table's fields (POSIX lets dlsym's pointer be a function's).
static const char *const names[] = {
    "status_to_string", "image_surface_create", "surface_destroy", "surface_status", "surface_flush",
    "surface_write_to_png_stream", "create", "destroy", "status", "save", "restore", "set_source_rgba",
    "set_line_width", "set_dash", "rectangle", "move_to", "line_to", "fill", "stroke", "clip", "select_font_face",
    "set_font_size", "text_extents", "show_text"};
_Static_assert(sizeof names / sizeof *names == sizeof(cifm_cairo_functions) / sizeof(void *), "one name a field");

const cifm_cairo_functions *cifm_cairo_load(char *error, size_t size) {
    if (loaded)
        return &cairo;
    void *lib = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(error, size, "%s", dlerror());
        return NULL;
    }
    void **slots = (void **)&cairo;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char symbol[64];
        snprintf(symbol, sizeof symbol, "cairo_%s", names[i]);
        if (!(slots[i] = dlsym(lib, symbol))) {
            snprintf(error, size, "libcairo.so.2 lacks %s", symbol);
            return NULL;
        }
    }
    loaded = 1;
    return &cairo;
}
