package truv

import (
	"fmt"
	"strconv"
	"strings"
)

// AllocationKind is how much of each paycheck the switch sends to the target
// account. The service's giving modes map onto it one to one: pct is
// AllocationPercent, fixed is AllocationAmount.
type AllocationKind string

// The allocation kinds the service uses. Truv's bridge token also accepts
// "entire" (the whole paycheck); the service never asks for it, because a
// gift is always part of a paycheck.
const (
	AllocationPercent AllocationKind = "percent"
	AllocationAmount  AllocationKind = "amount"
)

// MaxAmountHundredths bounds a fixed allocation at $100,000.00 per paycheck,
// the same ceiling the service puts on a fixed gift.
const MaxAmountHundredths = 100_000_00

// Allocation is a deposit-switch allocation in the service's own unit:
// hundredths, that is basis points for a percentage (1250 is 12.5%) and
// cents for an amount (2550 is $25.50). It becomes Truv's account.deposit_type
// and account.deposit_value only at this package's edge.
type Allocation struct {
	Kind       AllocationKind
	Hundredths int64
}

// Percent is an allocation of a percentage of each paycheck, in basis points.
func Percent(basisPoints int64) Allocation {
	return Allocation{Kind: AllocationPercent, Hundredths: basisPoints}
}

// Amount is an allocation of a fixed dollar amount per paycheck, in cents.
func Amount(cents int64) Allocation {
	return Allocation{Kind: AllocationAmount, Hundredths: cents}
}

// Validate refuses an allocation Truv could not carry out as the donor
// configured it, before anything is sent.
func (a Allocation) Validate() error {
	switch a.Kind {
	case AllocationPercent:
		if a.Hundredths <= 0 || a.Hundredths > 100_00 {
			return fmt.Errorf("%w: a percent allocation must be above 0 and at most 100%%, got %s", ErrInvalidRequest, decimal(a.Hundredths))
		}
	case AllocationAmount:
		if a.Hundredths <= 0 || a.Hundredths > MaxAmountHundredths {
			return fmt.Errorf("%w: an amount allocation must be above $0 and at most $%s, got %s", ErrInvalidRequest, decimal(MaxAmountHundredths), decimal(a.Hundredths))
		}
	default:
		return fmt.Errorf("%w: allocation kind %q is neither %q nor %q", ErrInvalidRequest, a.Kind, AllocationPercent, AllocationAmount)
	}
	return nil
}

// depositValue writes the allocation the way Truv's own quickstarts send
// account.deposit_value: a decimal string ("12.5", "100").
func (a Allocation) depositValue() string { return decimal(a.Hundredths) }

// String says the allocation for logs and errors: "12.5%" or "$25.50".
func (a Allocation) String() string {
	if a.Kind == AllocationPercent {
		return decimal(a.Hundredths) + "%"
	}
	return fmt.Sprintf("$%d.%02d", a.Hundredths/100, a.Hundredths%100)
}

// decimal writes hundredths as a plain decimal without trailing zeros:
// 1250 is "12.5", 300 is "3", 5 is "0.05".
func decimal(h int64) string {
	sign := ""
	if h < 0 {
		sign, h = "-", -h
	}
	s := fmt.Sprintf("%d.%02d", h/100, h%100)
	return sign + strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// ParseDepositValue reads Truv's account.deposit_value back into hundredths.
// Truv's quickstarts send it as a string ("100") and its demo application as
// a number (100), so both are read; anything finer than a hundredth is
// refused rather than rounded, because money is at stake.
func ParseDepositValue(s string) (int64, error) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 || !allDigits(whole) || (frac != "" && !allDigits(frac)) {
		return 0, fmt.Errorf("deposit value %q is not a decimal with at most two fraction digits", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 1<<40 {
		return 0, fmt.Errorf("deposit value %q is out of range", s)
	}
	f, _ := strconv.ParseInt(frac, 10, 64)
	return w*100 + f, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
