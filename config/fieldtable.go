package config

// Tables of fields: each object of the configuration is described once, by
// a fields table listing its members, what kind of value each takes, and
// where the value goes. The same table gives the names that readMembers
// accepts and suggests, and the readers that check and store the values, so
// a field cannot be known to one and missing from the other.

import "github.com/tidwall/gjson"

// A field is one member of an object of type T, as its table describes it.
type field[T any] struct {
	name string
	// required says the member must be set (present and not null).
	required bool
	// read checks the member's value v, found at path, and stores it in dst.
	// It is called only when the member is set.
	read func(dst *T, path string, v gjson.Result) error
}

// fields is the table of an object's members. Its order is the order in
// which the members are read, so the order in which their errors are
// reported, whatever their order in the document.
type fields[T any] []field[T]

// names returns the members' names, in table order: the known names for
// readMembers, first ones winning suggestions on a tie.
func (fs fields[T]) names() []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return names
}

// read reads the object v, at path, into dst: readMembers refuses what is
// not an object and unknown or duplicate members, then apply reads the
// members.
func (fs fields[T]) read(dst *T, path string, v gjson.Result) error {
	members, err := readMembers(path, v, fs.names(), nil)
	if err != nil {
		return err
	}
	return fs.apply(dst, path, members)
}

// apply reads members, an object's members by name as readMembers returns
// them, into dst in table order, stopping at the first error. A required
// member that is not set is refused; other unset ones leave dst as it is,
// so dst holds the defaults when apply is called.
func (fs fields[T]) apply(dst *T, path string, members map[string]gjson.Result) error {
	for _, f := range fs {
		p := child(path, f.name)
		v := members[f.name]
		if !isSet(v) {
			if f.required {
				return fieldErr(p, "required")
			}
			continue
		}
		if err := f.read(dst, p, v); err != nil {
			return err
		}
	}
	return nil
}

// required returns f, marked as a member that must be set.
func required[T any](f field[T]) field[T] {
	f.required = true
	return f
}

// valueField is a member whose value readValue checks and returns, and
// set stores: the shape of every scalar kind below.
func valueField[T, V any](name string, readValue func(path string, v gjson.Result) (V, error), set func(*T, V)) field[T] {
	return field[T]{name: name, read: func(dst *T, path string, v gjson.Result) error {
		x, err := readValue(path, v)
		if err == nil {
			set(dst, x)
		}
		return err
	}}
}

// stringField is a string member.
func stringField[T any](name string, set func(*T, string)) field[T] {
	return valueField(name, readString, set)
}

// nonEmptyStringField is a string member that must not be "".
func nonEmptyStringField[T any](name string, set func(*T, string)) field[T] {
	return valueField(name, readNonEmptyString, set)
}

// boolField is a boolean member.
func boolField[T any](name string, set func(*T, bool)) field[T] {
	return valueField(name, readBool, set)
}

// intField is an integer member in [min, max].
func intField[T any](name string, min, max int64, set func(*T, int64)) field[T] {
	return valueField(name, func(path string, v gjson.Result) (int64, error) {
		return readInt(path, v, min, max)
	}, set)
}

// numberField is a number member in [min, max].
func numberField[T any](name string, min, max float64, set func(*T, float64)) field[T] {
	return valueField(name, func(path string, v gjson.Result) (float64, error) {
		return readNumber(path, v, min, max)
	}, set)
}

// enumField is a string member that must be one of names; set receives the
// index of the one it is, which is the value of the matching Go constant.
func enumField[T any](name string, names []string, set func(*T, int)) field[T] {
	return valueField(name, func(path string, v gjson.Result) (int, error) {
		return readEnum(path, v, names)
	}, set)
}

// objectField is a member that is an object described by the table fs, read
// into the U that at returns; that U holds the object's defaults.
func objectField[T, U any](name string, fs fields[U], at func(*T) *U) field[T] {
	return field[T]{name: name, read: func(dst *T, path string, v gjson.Result) error {
		return fs.read(at(dst), path, v)
	}}
}

// customField is a member whose value read checks and stores itself.
func customField[T any](name string, read func(dst *T, path string, v gjson.Result) error) field[T] {
	return field[T]{name: name, read: read}
}
