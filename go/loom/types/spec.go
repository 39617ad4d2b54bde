package types

import (
	"fmt"
	"go/constant"
	"math/big"
	"strconv"
	"strings"
)

// parseSpecValue parses the text of a specialization value for a constant of type b.
func parseSpecValue(text string, b *Basic) (constant.Value, error) {
	text = strings.TrimSpace(text)
	switch {
	case b.IsBool():
		v, err := strconv.ParseBool(text)
		if err != nil {
			return nil, fmt.Errorf("not an i1 value (true or false)")
		}
		return constant.MakeBool(v), nil
	case b.IsInteger():
		clean := strings.ReplaceAll(text, "_", "")
		n, ok := new(big.Int).SetString(clean, 0)
		if !ok {
			return nil, fmt.Errorf("not an integer value of type %s", b)
		}
		v, err := representable(constant.Make(n), b)
		if err != nil {
			return nil, fmt.Errorf("value %v", err)
		}
		return v, nil
	case b.IsFloat():
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("not a floating-point value of type %s", b)
		}
		v, err := representable(constant.MakeFloat64(f), b)
		if err != nil {
			return nil, fmt.Errorf("value %v", err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("type %s cannot be specialized", b)
}
