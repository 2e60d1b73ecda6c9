// Jinja built-ins other than filters: string and dict methods, tests (`is defined`...), and the global functions
// (namespace, range, raise_exception, strftime_now), each behaving as in @huggingface/jinja.
#pragma once

#include <optional>
#include <string>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

namespace parallm::chat {

// `s.name` on a string: a bound method (upper, split, replace...), `length`, or undefined.
Value StringMember(const Value& str, const std::string& name);
// `o.name` on an object when it has no such key: get, items, keys, values, dictsort, or undefined.
Value ObjectMember(const Value& object, const std::string& name);
Value ObjectItems(const Value& object);  // [[key, value], ...]
Value ObjectKeys(const Value& object);

// Runs test `name` on `operand` (`other` is the second operand that selectattr passes, or null).
// nullopt when there is no such test.
std::optional<bool> RunTest(const std::string& name, const Value& operand, const Value* other);

// `item.a.b.0`: dotted path through objects and array indices; undefined where it leads nowhere.
Value GetAttributeValue(const Value& item, const std::string& path);

// The globals of a fresh render: true/false/none (and title-case twins), raise_exception, range, strftime_now.
void InstallGlobals(Environment* env, const RenderOptions& options);
// The `namespace` function every scope starts with.
const Value& NamespaceFunction();

// Python-style strftime limited to what @huggingface/jinja supports: %Y %m %d %b %B %H %M %%; other
// directives are left as written.
std::string Strftime(const std::string& format, const LocalTime& time);

}  // namespace parallm::chat
