package core

// ConfigChecker is implemented by adapters that check an account's
// settings beyond the declared fields (a base URL override, say).
// AddAccount calls it before anything is stored; its error should be a
// KindInvalid *Error naming the field.
type ConfigChecker interface {
	CheckConfig(config map[string]string) error
}
