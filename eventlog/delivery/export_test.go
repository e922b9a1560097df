package delivery

// DecodeAttemptsForTest reads one message of the attempt log, as Last does.
var DecodeAttemptsForTest = decodeAttempts
