import CCairo
import CIfmeterImage

/// A cairo call that failed, with cairo's own words for its status.
package struct CairoError: Error, Sendable, CustomStringConvertible {
    package var call: String
    package var status: String
    /// Why libcairo.so.2 could not be loaded (dlerror's words), when that
    /// is the failure: nothing was drawn.
    package var unloaded: String?
    package var description: String {
        unloaded.map { "libcairo.so.2 could not be loaded (\($0))" } ?? "\(call) failed: \(status)"
    }
}

/// The one layer that calls cairo: an RGB surface of a size, a context on
/// it, drawing calls, and the PNG cairo writes, into memory. Every cairo
/// object is destroyed by a `defer` beside its creation; a failed call
/// throws with its name and cairo's status text.
///
/// cairo is loaded with dlopen on the first picture (CIfmeterImage's
/// table), not linked: linked, it and the libraries under it would load
/// with every command, serve included.
enum Cairo {
    /// cairo's functions, or why libcairo.so.2 did not load: tried once.
    static let library: Result<cifm_cairo_functions, CairoError> = {
        var reason = [CChar](repeating: 0, count: 512)
        guard let table = cifm_cairo_load(&reason, reason.count) else {
            let text = reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            return .failure(CairoError(call: "dlopen", status: text, unloaded: text))
        }
        return .success(table.pointee)
    }()

    static func check(_ f: cifm_cairo_functions, _ status: cairo_status_t, _ call: String) throws(CairoError) {
        guard status != CAIRO_STATUS_SUCCESS else { return }
        throw CairoError(call: call, status: f.status_to_string(status).map { String(cString: $0) } ?? "status \(status.rawValue)")
    }

    /// The bytes cairo hands `cairo_surface_write_to_png_stream`.
    final class Sink {
        var bytes: [UInt8] = []
    }

    /// A `width` × `height` picture drawn by `draw`, as PNG bytes.
    static func png(width: Int, height: Int, draw: (Painter) -> Void) throws(CairoError) -> [UInt8] {
        let f = try library.get()
        guard let surface = f.image_surface_create(CAIRO_FORMAT_RGB24, Int32(width), Int32(height)) else {
            throw CairoError(call: "cairo_image_surface_create", status: "no surface")
        }
        defer { f.surface_destroy(surface) }
        try check(f, f.surface_status(surface), "cairo_image_surface_create")
        guard let context = f.create(surface) else { throw CairoError(call: "cairo_create", status: "no context") }
        defer { f.destroy(context) }
        try check(f, f.status(context), "cairo_create")
        draw(Painter(f: f, cr: context))
        // cairo's errors are sticky: the first failed drawing call is the
        // context's status from then on.
        try check(f, f.status(context), "drawing (cairo_status)")
        f.surface_flush(surface)
        let sink = Sink()
        let status = withExtendedLifetime(sink) {
            f.surface_write_to_png_stream(
                surface,
                { closure, data, length in
                    guard let closure, let data else { return CAIRO_STATUS_WRITE_ERROR }
                    Unmanaged<Sink>.fromOpaque(closure).takeUnretainedValue().bytes.append(
                        contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
                    return CAIRO_STATUS_SUCCESS
                }, Unmanaged.passUnretained(sink).toOpaque())
        }
        try check(f, status, "cairo_surface_write_to_png_stream")
        return sink.bytes
    }
}

/// Drawing calls on one context, in the charts' terms: colours as
/// `0xRRGGBB`, text in DejaVu Sans, anchored like SVG's `text-anchor`.
struct Painter {
    enum Anchor { case start, middle, end }

    /// cairo's functions (Cairo.library's).
    let f: cifm_cairo_functions
    let cr: OpaquePointer

    func color(_ rgb: UInt32, alpha: Double = 1) {
        f.set_source_rgba(
            cr, Double((rgb >> 16) & 0xFF) / 255, Double((rgb >> 8) & 0xFF) / 255, Double(rgb & 0xFF) / 255, alpha)
    }

    func fill(_ x: Double, _ y: Double, _ w: Double, _ h: Double, _ rgb: UInt32) {
        guard w > 0, h > 0 else { return }
        color(rgb)
        f.rectangle(cr, x, y, w, h)
        f.fill(cr)
    }

    func frame(_ x: Double, _ y: Double, _ w: Double, _ h: Double, _ rgb: UInt32) {
        color(rgb)
        f.set_line_width(cr, 1)
        f.rectangle(cr, x + 0.5, y + 0.5, w - 1, h - 1)
        f.stroke(cr)
    }

    func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ rgb: UInt32, width: Double = 1, dash: [Double] = []) {
        color(rgb)
        f.set_line_width(cr, width)
        dash.withUnsafeBufferPointer { f.set_dash(cr, $0.baseAddress, Int32($0.count), 0) }
        f.move_to(cr, x1, y1)
        f.line_to(cr, x2, y2)
        f.stroke(cr)
        f.set_dash(cr, nil, 0, 0)
    }

    /// Diagonal hatching over a rectangle: a lower bound's mark.
    func hatch(_ x: Double, _ y: Double, _ w: Double, _ h: Double) {
        guard w > 0, h > 0 else { return }
        f.save(cr)
        f.rectangle(cr, x, y, w, h)
        f.clip(cr)
        color(0x222222, alpha: 0.6)
        f.set_line_width(cr, 1.5)
        var d = -h
        while d < w {
            f.move_to(cr, x + d, y + h)
            f.line_to(cr, x + d + h, y)
            d += 5
        }
        f.stroke(cr)
        f.restore(cr)
    }

    /// Text cairo takes: its UTF-8 check refuses Unicode's noncharacters
    /// (U+FDD0 to U+FDEF, U+FFFE and U+FFFF of every plane), which a
    /// Swift string may hold (an interface's name), and the whole picture
    /// fails; they are written `\u{fffe}`, as the SVG writes them. A NUL,
    /// which would end the C string, is written `\x00`.
    static func drawable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { refused($0) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if refused(scalar) {
                out += scalar.value == 0 ? "\\x00" : "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func refused(_ s: Unicode.Scalar) -> Bool {
        s.value == 0 || (0xFDD0...0xFDEF).contains(s.value) || s.value & 0xFFFE == 0xFFFE
    }

    func textWidth(_ text: String, size: Double, bold: Bool = false) -> Double {
        font(size, bold)
        var extents = cairo_text_extents_t()
        f.text_extents(cr, Self.drawable(text), &extents)
        return extents.x_advance
    }

    func text(_ text: String, _ x: Double, _ y: Double, size: Double = 11, bold: Bool = false, _ rgb: UInt32 = 0x000000, anchor: Anchor = .start) {
        let width = anchor == .start ? 0 : textWidth(text, size: size, bold: bold)
        font(size, bold)
        color(rgb)
        f.move_to(cr, x - (anchor == .middle ? width / 2 : anchor == .end ? width : 0), y)
        f.show_text(cr, Self.drawable(text))
    }

    /// Text wrapped at spaces to lines no wider than `width`, 1.3 sizes apart.
    func paragraph(_ text: String, _ x: Double, _ y: Double, width: Double, size: Double, _ rgb: UInt32) {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            let candidate = current.isEmpty ? String(word) : current + " " + word
            if !current.isEmpty, textWidth(candidate, size: size) > width {
                lines.append(current)
                current = String(word)
            } else {
                current = candidate
            }
        }
        if !current.isEmpty { lines.append(current) }
        for (n, line) in lines.enumerated() { self.text(line, x, y + Double(n) * size * 1.3, size: size, rgb) }
    }

    private func font(_ size: Double, _ bold: Bool) {
        f.select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL)
        f.set_font_size(cr, size)
    }
}
