// cairo for `usage --png`, loaded with dlopen on the first picture: linked,
// libcairo.so.2 and the 17 libraries under it (pixman, fontconfig, freetype,
// png, xcb, X11) would load with every command, serve's 2 MiB of RSS
// included. The types and prototypes are cairo's header's (CCairo); only
// the functions come from the table. Prefix: `cifm_`.
#ifndef CIFMETER_IMAGE_H
#define CIFMETER_IMAGE_H
#include <stddef.h>
#include <cairo/cairo.h>

/// The cairo functions IfmeterImage's Cairo.swift calls, as dlsym found them.
typedef struct cifm_cairo_functions {
#define CIFM_CAIRO(name) __typeof__(cairo_##name) *name
    CIFM_CAIRO(status_to_string); CIFM_CAIRO(image_surface_create); CIFM_CAIRO(surface_destroy);
    CIFM_CAIRO(surface_status); CIFM_CAIRO(surface_flush); CIFM_CAIRO(surface_write_to_png_stream);
    CIFM_CAIRO(create); CIFM_CAIRO(destroy); CIFM_CAIRO(status); CIFM_CAIRO(save); CIFM_CAIRO(restore);
    CIFM_CAIRO(set_source_rgba); CIFM_CAIRO(set_line_width); CIFM_CAIRO(set_dash); CIFM_CAIRO(rectangle);
    CIFM_CAIRO(move_to); CIFM_CAIRO(line_to); CIFM_CAIRO(fill); CIFM_CAIRO(stroke); CIFM_CAIRO(clip);
    CIFM_CAIRO(select_font_face); CIFM_CAIRO(set_font_size); CIFM_CAIRO(text_extents); CIFM_CAIRO(show_text);
#undef CIFM_CAIRO
} cifm_cairo_functions;

/// Loads libcairo.so.2 once (one caller at a time) and returns its table,
/// or NULL with the reason (dlerror's, or the function it lacks) in `error`.
const cifm_cairo_functions *cifm_cairo_load(char *error, size_t size);
#endif
