package io.statusstore.agent.json;

/**
 * A compact JSON writer for the agent's few, fixed payloads (no whitespace, fields in call order).
 *
 * <p>Strings are escaped as JSON requires: quote, backslash and every control character (the short forms
 * {@code \b \f \n \r \t}, the others as <code>&#92;u00XX</code> in upper case, as Jackson writes them); a lone surrogate,
 * which UTF-8 cannot carry, is escaped too. Every other character is written as it is (raw UTF-8 on the wire).
 */
public final class JsonWriter {
    private static final char[] HEX = "0123456789ABCDEF".toCharArray();

    private final StringBuilder out = new StringBuilder(256);
    private boolean needComma;

    public JsonWriter beginObject() {
        separate();
        out.append('{');
        needComma = false;
        return this;
    }

    public JsonWriter endObject() {
        out.append('}');
        needComma = true;
        return this;
    }

    public JsonWriter beginArray() {
        separate();
        out.append('[');
        needComma = false;
        return this;
    }

    public JsonWriter endArray() {
        out.append(']');
        needComma = true;
        return this;
    }

    /** Writes a member's name; its value follows. */
    public JsonWriter name(String name) {
        separate();
        quote(name);
        out.append(':');
        needComma = false;
        return this;
    }

    public JsonWriter value(String value) {
        separate();
        if (value == null) {
            out.append("null");
        } else {
            quote(value);
        }
        needComma = true;
        return this;
    }

    public JsonWriter value(long value) {
        separate();
        out.append(value);
        needComma = true;
        return this;
    }

    public JsonWriter value(boolean value) {
        separate();
        out.append(value);
        needComma = true;
        return this;
    }

    public JsonWriter nullValue() {
        return value((String) null);
    }

    @Override
    public String toString() {
        return out.toString();
    }

    private void separate() {
        if (needComma) {
            out.append(',');
        }
    }

    private void quote(String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20 || isLoneSurrogate(s, i)) {
                        unicodeEscape(c);
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    private static boolean isLoneSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1));
        }
        if (Character.isLowSurrogate(c)) {
            return i == 0 || !Character.isHighSurrogate(s.charAt(i - 1));
        }
        return false;
    }

    private void unicodeEscape(char c) {
        out.append("\\u")
                .append(HEX[(c >> 12) & 0xF]).append(HEX[(c >> 8) & 0xF])
                .append(HEX[(c >> 4) & 0xF]).append(HEX[c & 0xF]);
    }
}
