import IfmeterCore
import Testing

@Suite struct JSONTests {
    @Test func parsesEveryKindOfValue() throws {
        let v = try JSONParser.parse(#" {"a": [1, -2.5e3, true, false, null, "x\n\u00e9\ud83d\ude00"], "b": {}} "#)
        #expect(v["a"] == .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null, .string("x\né😀")]))
        #expect(v["b"] == .object([:]))
    }

    @Test func keepsBigIntegersExact() throws {
        let v = try JSONParser.parse("18446744073709551615")
        #expect(v.uint64Value == UInt64.max)
        #expect(try JSONParser.parse("18446744073709551616").uint64Value == nil)
        #expect(try JSONParser.parse("1.0").uint64Value == nil)
        #expect(try JSONParser.parse("-0").uint64Value == nil)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\\x\"", "\"a", "{\"a\":1}x", "[\"\u{01}\"]", "\"\\ud800\""])
    func rejectsInvalidText(_ text: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(text) }
    }

    @Test func rejectsDeepNesting() {
        let deep = String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)
        #expect(throws: JSONError.self) { try JSONParser.parse(deep) }
    }

    @Test func writesSortedKeysAndEscapes() {
        let v: JSONValue = .object(["b": .number(1), "a": .string("q\"\\\u{1}"), "c": .array([])])
        #expect(JSONWriter().string(v) == #"{"a":"q\"\\\u0001","b":1,"c":[]}"#)
        #expect(JSONWriter(indent: 2).string(.object(["x": .array([.null])])) == "{\n  \"x\": [\n    null\n  ]\n}")
        #expect(JSONValue.number(Double.infinity) == .null)
    }
}
