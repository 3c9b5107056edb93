package builtin_test

import (
	"errors"
	"fmt"

	"github.com/gale-stream/gale/builtin"
)

// The expression bolts as Go values: compiled over the fields the bolt reads, each
// tells the fields it emits; a bad expression is an *ExprError at its byte.
func ExampleNewFilterBolt() {
	in := []string{"order", "quantity", "payload"}
	f, err := builtin.NewFilterBolt("quantity > 0", in)
	if err != nil {
		panic(err)
	}
	k, err := builtin.NewKeyBolt("upper(fromJSON(payload).sku)", f.Fields(), builtin.WithKeyField("sku"))
	if err != nil {
		panic(err)
	}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "sku", Expr: "sku"}, {Name: "twice", Expr: "quantity * 2"}}, k.Fields())
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Fields(), k.Fields(), m.Fields())

	_, err = builtin.NewFilterBolt("quantity > 0 && colour == 'red'", in)
	var ee *builtin.ExprError
	fmt.Println(errors.As(err, &ee), ee.Offset)
	fmt.Println(err)
	// Output:
	// [order quantity payload] [order quantity payload sku] [sku twice]
	// true 16
	// invalid expression "quantity > 0 && colour == 'red'" at 1:17: unknown name colour (the input's fields: order, quantity, payload)
}
