package domain

// PayrollProvider is a payroll provider a donor can connect in the hosted
// flow.
type PayrollProvider struct {
	ID   string
	Name string
}

// SandboxPayrollProviders are the sandbox's pretend payroll providers.
var SandboxPayrollProviders = []PayrollProvider{
	{ID: "acme_payroll", Name: "Acme Payroll"},
	{ID: "summit_hr", Name: "Summit HR"},
	{ID: "harbor_paychecks", Name: "Harbor Paychecks"},
}

// The sandbox payroll sign-in that succeeds; any other fails, as user_bad
// is documented to.
const (
	SandboxPayrollUser     = "user_good"
	SandboxPayrollPassword = "pass_good"
)

// SandboxPayrollSignIn decides a sandbox payroll sign-in.
func SandboxPayrollSignIn(user, password string) bool {
	return user == SandboxPayrollUser && password == SandboxPayrollPassword
}
