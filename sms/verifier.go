package sms

import "context"

// Verifier sends one-time codes to phones and checks them.
type Verifier interface {
	// Send sends a fresh 6-digit code to phone (E.164).
	Send(ctx context.Context, phone string) error
	// Check reports whether code is the one last sent to phone.
	Check(ctx context.Context, phone, code string) (bool, error)
}

// SandboxCode is the code the sandbox accepts.
const SandboxCode = "000000"

// Sandbox is the sandbox stack's verifier: no SMS is sent and the code is
// always SandboxCode.
type Sandbox struct{}

// Send does nothing: the sandbox sends no SMS.
func (Sandbox) Send(context.Context, string) error { return nil }

// Check accepts SandboxCode only.
func (Sandbox) Check(_ context.Context, _, code string) (bool, error) {
	return code == SandboxCode, nil
}
