"""Source of the built-in support knowledge base (Lumen Books, a fictional online bookshop).

Run ``python -m rubricgym.envs.rag.build_kb`` to regenerate ``data/lumen_kb.json``. Every
article, question and reference answer was written for this project. Each question lists the
articles that support its answer; unanswerable questions list none and their reference says the
knowledge base does not cover them.
"""

from __future__ import annotations

import json
from pathlib import Path

# (id, topic, title, text)
ARTICLES = [
    ("REF-01", "refunds", "Refunds for printed books",
     "Printed books can be returned for a full refund within 30 days of delivery if they are unread and undamaged. "
     "Refunds go back to the original payment method within 5 business days after the return is received."),
    ("REF-02", "refunds", "Refunds for e-books",
     "E-books can be refunded within 7 days of purchase only if they have not been downloaded or opened. "
     "Once an e-book has been downloaded, it is no longer refundable."),
    ("REF-03", "refunds", "Refunds for audiobooks",
     "Audiobooks can be refunded within 14 days of purchase if less than 10 percent of the audio has been played. "
     "Refunded audiobooks are removed from your library."),
    ("REF-04", "refunds", "Damaged or wrong items",
     "If an item arrives damaged or you received the wrong item, report it within 14 days of delivery with a photo. "
     "We send a free replacement or a full refund, including shipping costs, and you do not need to return the item."),
    ("REF-05", "refunds", "How to start a return",
     "Start a return from the Orders page by choosing Return item. A prepaid return label is emailed to you within 24 hours. "
     "You can also write to returns@lumenbooks.example."),
    ("REF-06", "refunds", "Return shipping costs",
     "Return shipping is free for customers in the EU and the UK. Customers elsewhere pay a flat 6 euro return shipping fee, "
     "which is deducted from the refund."),
    ("REF-07", "refunds", "Refunds for gift card purchases",
     "Items paid for with a gift card are refunded as gift card credit, not as cash. The credit is added to your account balance."),
    ("REF-08", "refunds", "Refunds for pre-orders",
     "Pre-orders can be cancelled for a full refund at any time before the release date. You are only charged when the item ships."),
    ("SHP-01", "shipping", "Standard shipping times",
     "Standard shipping takes 3 to 5 business days within the EU and 7 to 12 business days to other countries."),
    ("SHP-02", "shipping", "Express shipping",
     "Express shipping delivers in 1 to 2 business days within the EU and costs 9 euros per order. "
     "Orders placed before 2 pm Central European Time ship the same day."),
    ("SHP-03", "shipping", "Free shipping threshold",
     "Orders over 35 euros ship free with standard shipping. Orders under 35 euros pay a 4 euro standard shipping fee."),
    ("SHP-04", "shipping", "Tracking your order",
     "A tracking number is emailed when your order ships. Tracking updates can take up to 24 hours to appear."),
    ("SHP-05", "shipping", "Lost parcels",
     "If tracking shows no movement for 10 business days, contact support and we will open an investigation with the carrier. "
     "If the parcel is not found within 5 more business days, we send a replacement or a refund."),
    ("SHP-06", "shipping", "Changing the delivery address",
     "You can change the delivery address until the order ships, from the Orders page. After shipping, the address can no longer be changed."),
    ("SHP-07", "shipping", "Countries we ship to",
     "We ship to all EU countries, the UK, Norway, Switzerland, the United States and Canada. We do not ship to PO boxes."),
    ("SHP-08", "shipping", "Customs and import duties",
     "Orders shipped outside the EU may be charged customs duties by the destination country. These duties are paid by the customer."),
    ("ACC-01", "accounts", "Creating an account",
     "You need an account to buy e-books and audiobooks. Printed books can be bought as a guest with just an email address."),
    ("ACC-02", "accounts", "Resetting your password",
     "Use Forgot password on the sign-in page. The reset link is valid for 60 minutes. "
     "After 5 failed sign-in attempts, your account is locked for 30 minutes."),
    ("ACC-03", "accounts", "Two-factor authentication",
     "You can turn on two-factor authentication in Account settings with an authenticator app. "
     "Backup codes are shown once when you turn it on; keep them safe."),
    ("ACC-04", "accounts", "Closing your account",
     "To close your account, go to Account settings and choose Close account. Closing is permanent after 14 days; "
     "your e-book and audiobook library is deleted and cannot be restored."),
    ("ACC-05", "accounts", "Changing your email address",
     "You can change your email address in Account settings. We send a confirmation link to the new address, "
     "and the change takes effect once you click it."),
    ("ACC-06", "accounts", "Sharing an account",
     "Accounts are personal. A Family Library lets up to 4 family members share e-books and audiobooks from one account."),
    ("BIL-01", "billing", "Payment methods",
     "We accept Visa, Mastercard, PayPal and Lumen gift cards. We do not accept cash on delivery or bank cheques."),
    ("BIL-02", "billing", "When you are charged",
     "Your card is charged when your order ships. For digital items, you are charged at the moment of purchase."),
    ("BIL-03", "billing", "Invoices",
     "Invoices are available as PDF files on the Orders page 24 hours after an order ships. Business customers can add a VAT number at checkout."),
    ("BIL-04", "billing", "Double charges",
     "If you see two charges for one order, one is usually a temporary authorisation that disappears within 7 days. "
     "If both charges remain after 7 days, contact billing@lumenbooks.example."),
    ("BIL-05", "billing", "Prices and currency",
     "Prices are shown in euros and include VAT for EU customers. Your bank may add a fee for payments in other currencies."),
    ("BIL-06", "billing", "Lumen Plus membership fee",
     "Lumen Plus costs 9.99 euros per month or 99 euros per year. It includes free express shipping and one audiobook credit per month."),
    ("BIL-07", "billing", "Cancelling Lumen Plus",
     "You can cancel Lumen Plus at any time in Account settings. The membership stays active until the end of the paid period; "
     "monthly fees are not refunded, but yearly memberships cancelled within 14 days of payment are refunded in full."),
    ("BIL-08", "billing", "Unused audiobook credits",
     "Unused audiobook credits roll over for up to 6 months. Credits expire when a Lumen Plus membership ends."),
    ("GFT-01", "gift cards", "Buying gift cards",
     "Gift cards are available from 10 to 200 euros and are delivered by email. They cannot be bought with another gift card."),
    ("GFT-02", "gift cards", "Gift card validity",
     "Gift cards are valid for 3 years from the date of purchase. The remaining balance is shown in your account."),
    ("GFT-03", "gift cards", "Lost gift card codes",
     "If you lost a gift card code, the buyer can resend it from their Orders page. We cannot replace a code that has already been redeemed."),
    ("WAR-01", "warranties", "E-reader warranty",
     "Lumen e-readers come with a 2-year warranty against manufacturing defects. The warranty does not cover water damage, "
     "cracked screens or normal battery wear."),
    ("WAR-02", "warranties", "Making a warranty claim",
     "To make a warranty claim, send the serial number and a description of the fault to warranty@lumenbooks.example. "
     "Approved devices are repaired or replaced within 10 business days."),
    ("WAR-03", "warranties", "Extended warranty",
     "An extended warranty adds 2 more years of cover for 29 euros. It must be bought within 30 days of receiving the e-reader."),
    ("WAR-04", "warranties", "E-reader returns",
     "Unopened e-readers can be returned within 30 days of delivery for a full refund. Opened e-readers can be returned within "
     "14 days if they are in as-new condition, with a 15 euro restocking fee."),
    ("PRV-01", "privacy", "What data we collect",
     "We collect your name, email address, delivery addresses, order history and reading progress for e-books. "
     "We never sell personal data to third parties."),
    ("PRV-02", "privacy", "Downloading your data",
     "You can request a copy of your personal data from Account settings. We send a download link within 30 days."),
    ("PRV-03", "privacy", "Deleting your data",
     "You can ask us to delete your personal data by writing to privacy@lumenbooks.example. Order records are kept for "
     "10 years because tax law requires it."),
    ("PRV-04", "privacy", "Marketing emails",
     "You can unsubscribe from marketing emails with the link at the bottom of any email or in Account settings. "
     "Order and security emails are always sent."),
    ("PRV-05", "privacy", "Cookies",
     "We use essential cookies to run the shop and optional analytics cookies only with your consent. "
     "You can change your choice at any time from the cookie banner link in the footer."),
    ("SUP-01", "support", "Contacting support",
     "Support is available by chat from 8 am to 8 pm Central European Time, Monday to Saturday, and by email at "
     "help@lumenbooks.example. We answer emails within 2 business days."),
    ("SUP-02", "support", "Damaged e-book files",
     "If an e-book file does not open, download it again from your library. If it still fails, contact support and we replace the file "
     "or refund the purchase, even if it was downloaded."),
]

# (question, reference answer, supporting article ids)
QUESTIONS = [
    ("How long do I have to return a printed book?", "You can return an unread, undamaged printed book within 30 days of delivery for a full refund [REF-01].", ["REF-01"]),
    ("When will I get my money back after returning a paperback?", "The refund goes to your original payment method within 5 business days after we receive the return [REF-01].", ["REF-01"]),
    ("Can I return a book I have already read?", "No. Printed books can only be returned if they are unread and undamaged [REF-01].", ["REF-01"]),
    ("Can I get a refund for an e-book I already downloaded?", "No. Once an e-book has been downloaded it is no longer refundable [REF-02]. If the file is damaged, support can replace it or refund it [SUP-02].", ["REF-02", "SUP-02"]),
    ("How many days do I have to refund an e-book?", "Within 7 days of purchase, if it has not been downloaded or opened [REF-02].", ["REF-02"]),
    ("I bought an e-book yesterday by mistake and never opened it. Can I get a refund?", "Yes. An e-book that has not been downloaded or opened can be refunded within 7 days of purchase [REF-02].", ["REF-02"]),
    ("What is the refund rule for audiobooks?", "Audiobooks can be refunded within 14 days of purchase if less than 10 percent has been played [REF-03].", ["REF-03"]),
    ("I listened to half of an audiobook. Can I return it?", "No. Audiobooks are only refundable if less than 10 percent of the audio has been played [REF-03].", ["REF-03"]),
    ("What happens to a refunded audiobook?", "It is removed from your library [REF-03].", ["REF-03"]),
    ("My book arrived damaged. What should I do?", "Report it within 14 days of delivery with a photo; we send a free replacement or a full refund including shipping, and you do not need to return it [REF-04].", ["REF-04"]),
    ("I received the wrong book. Do I have to send it back?", "No. Report it within 14 days with a photo and we send a replacement or a full refund without a return [REF-04].", ["REF-04"]),
    ("Is shipping refunded when an item arrives broken?", "Yes. For damaged or wrong items the full refund includes shipping costs [REF-04].", ["REF-04"]),
    ("How do I start a return?", "Choose Return item on the Orders page; a prepaid return label is emailed within 24 hours. You can also write to returns@lumenbooks.example [REF-05].", ["REF-05"]),
    ("What email address handles returns?", "returns@lumenbooks.example [REF-05].", ["REF-05"]),
    ("How soon do I get the return label?", "The prepaid return label is emailed within 24 hours [REF-05].", ["REF-05"]),
    ("Do I pay for return shipping if I live in Germany?", "No. Return shipping is free for customers in the EU and the UK [REF-06].", ["REF-06"]),
    ("I live in the United States. How much does return shipping cost?", "Customers outside the EU and the UK pay a flat 6 euro return shipping fee, deducted from the refund [REF-06].", ["REF-06"]),
    ("Is the return fee taken from my refund?", "Yes, for customers outside the EU and UK the 6 euro return fee is deducted from the refund [REF-06].", ["REF-06"]),
    ("I paid with a gift card. Can I get cash back when I return the item?", "No. Items paid with a gift card are refunded as gift card credit added to your account balance [REF-07].", ["REF-07"]),
    ("Where does the refund go for gift card purchases?", "It is added to your account balance as gift card credit [REF-07].", ["REF-07"]),
    ("Can I cancel a pre-order?", "Yes, at any time before the release date, for a full refund [REF-08].", ["REF-08"]),
    ("When am I charged for a pre-order?", "Only when the item ships [REF-08].", ["REF-08"]),
    ("How long does standard shipping take within the EU?", "3 to 5 business days [SHP-01].", ["SHP-01"]),
    ("How long does delivery to Canada take?", "Standard shipping to countries outside the EU takes 7 to 12 business days [SHP-01].", ["SHP-01", "SHP-07"]),
    ("How much is express shipping?", "9 euros per order; it delivers in 1 to 2 business days within the EU [SHP-02].", ["SHP-02"]),
    ("What is the cut-off time for same-day shipping?", "Express orders placed before 2 pm Central European Time ship the same day [SHP-02].", ["SHP-02"]),
    ("How fast is express delivery?", "1 to 2 business days within the EU [SHP-02].", ["SHP-02"]),
    ("Is shipping free?", "Standard shipping is free for orders over 35 euros; below that it costs 4 euros [SHP-03].", ["SHP-03"]),
    ("My order is 30 euros. What is the shipping fee?", "Orders under 35 euros pay a 4 euro standard shipping fee [SHP-03].", ["SHP-03"]),
    ("How do I track my order?", "A tracking number is emailed when your order ships; updates can take up to 24 hours to appear [SHP-04].", ["SHP-04"]),
    ("My tracking number shows nothing. Why?", "Tracking updates can take up to 24 hours to appear after shipping [SHP-04].", ["SHP-04"]),
    ("My parcel has not moved for two weeks. What now?", "If tracking shows no movement for 10 business days, contact support to open an investigation with the carrier; if it is not found within 5 more business days you get a replacement or a refund [SHP-05].", ["SHP-05"]),
    ("When do you replace a lost parcel?", "If it is not found within 5 business days after the carrier investigation starts, we send a replacement or a refund [SHP-05].", ["SHP-05"]),
    ("Can I change my delivery address?", "Yes, from the Orders page until the order ships; after shipping it can no longer be changed [SHP-06].", ["SHP-06"]),
    ("My order already shipped. Can I change the address?", "No. The address can no longer be changed after the order ships [SHP-06].", ["SHP-06"]),
    ("Do you ship to Australia?", "No. We ship to EU countries, the UK, Norway, Switzerland, the United States and Canada [SHP-07].", ["SHP-07"]),
    ("Can you deliver to a PO box?", "No, we do not ship to PO boxes [SHP-07].", ["SHP-07"]),
    ("Do you ship to Switzerland?", "Yes [SHP-07]. Orders outside the EU may be charged customs duties, paid by the customer [SHP-08].", ["SHP-07", "SHP-08"]),
    ("Who pays import duties for orders to the US?", "The customer; destination countries outside the EU may charge customs duties [SHP-08].", ["SHP-08"]),
    ("Will I pay customs on an order to Norway?", "Possibly: orders shipped outside the EU may be charged customs duties by the destination country, paid by the customer [SHP-08].", ["SHP-08"]),
    ("Do I need an account to buy a paperback?", "No. Printed books can be bought as a guest with just an email address [ACC-01].", ["ACC-01"]),
    ("Can I buy an e-book without an account?", "No. You need an account to buy e-books and audiobooks [ACC-01].", ["ACC-01"]),
    ("How do I reset my password?", "Use Forgot password on the sign-in page; the reset link is valid for 60 minutes [ACC-02].", ["ACC-02"]),
    ("How long is the password reset link valid?", "60 minutes [ACC-02].", ["ACC-02"]),
    ("My account is locked. How long until I can sign in?", "After 5 failed sign-in attempts the account is locked for 30 minutes [ACC-02].", ["ACC-02"]),
    ("Can I turn on two-factor authentication?", "Yes, in Account settings with an authenticator app; backup codes are shown once, so keep them safe [ACC-03].", ["ACC-03"]),
    ("Where can I see my 2FA backup codes again?", "They are shown only once, when you turn two-factor authentication on [ACC-03].", ["ACC-03"]),
    ("How do I delete my account?", "Choose Close account in Account settings; closing becomes permanent after 14 days and your e-book and audiobook library is deleted [ACC-04].", ["ACC-04"]),
    ("What happens to my e-books if I close my account?", "Your e-book and audiobook library is deleted and cannot be restored once closing is permanent after 14 days [ACC-04].", ["ACC-04"]),
    ("Can I undo closing my account?", "Only within 14 days; after that closing is permanent [ACC-04].", ["ACC-04"]),
    ("How do I change my email address?", "In Account settings; we send a confirmation link to the new address and the change takes effect when you click it [ACC-05].", ["ACC-05"]),
    ("Can I share my account with my family?", "Accounts are personal, but a Family Library lets up to 4 family members share e-books and audiobooks [ACC-06].", ["ACC-06"]),
    ("How many people can be in a Family Library?", "Up to 4 family members [ACC-06].", ["ACC-06"]),
    ("Which payment methods do you accept?", "Visa, Mastercard, PayPal and Lumen gift cards [BIL-01].", ["BIL-01"]),
    ("Can I pay cash on delivery?", "No, cash on delivery is not accepted [BIL-01].", ["BIL-01"]),
    ("Do you take PayPal?", "Yes [BIL-01].", ["BIL-01"]),
    ("When will my card be charged for a printed book?", "When your order ships [BIL-02].", ["BIL-02"]),
    ("When am I charged for an e-book?", "At the moment of purchase [BIL-02].", ["BIL-02"]),
    ("Where can I download an invoice?", "As a PDF on the Orders page, 24 hours after the order ships [BIL-03].", ["BIL-03"]),
    ("Can I add my company's VAT number?", "Yes, business customers can add a VAT number at checkout [BIL-03].", ["BIL-03"]),
    ("I was charged twice for one order.", "One charge is usually a temporary authorisation that disappears within 7 days; if both remain after 7 days, contact billing@lumenbooks.example [BIL-04].", ["BIL-04"]),
    ("Who do I contact about a charge that did not disappear?", "billing@lumenbooks.example, if both charges remain after 7 days [BIL-04].", ["BIL-04"]),
    ("Do prices include VAT?", "Yes, for EU customers; prices are shown in euros [BIL-05].", ["BIL-05"]),
    ("Why did my bank add a fee?", "Your bank may add a fee for payments in other currencies; our prices are in euros [BIL-05].", ["BIL-05"]),
    ("How much does Lumen Plus cost?", "9.99 euros per month or 99 euros per year [BIL-06].", ["BIL-06"]),
    ("What do I get with Lumen Plus?", "Free express shipping and one audiobook credit per month [BIL-06].", ["BIL-06"]),
    ("Does Lumen Plus include free express shipping?", "Yes [BIL-06].", ["BIL-06"]),
    ("How do I cancel Lumen Plus?", "In Account settings, at any time; it stays active until the end of the paid period [BIL-07].", ["BIL-07"]),
    ("Will I get my monthly Lumen Plus fee back if I cancel?", "No. Monthly fees are not refunded; the membership stays active until the end of the paid period [BIL-07].", ["BIL-07"]),
    ("I paid for a year of Lumen Plus last week. Can I get a refund?", "Yes. Yearly memberships cancelled within 14 days of payment are refunded in full [BIL-07].", ["BIL-07"]),
    ("Do unused audiobook credits expire?", "They roll over for up to 6 months and expire when the Lumen Plus membership ends [BIL-08].", ["BIL-08"]),
    ("What happens to my credits if I cancel Lumen Plus?", "Credits expire when the membership ends [BIL-08]; it stays active until the end of the paid period [BIL-07].", ["BIL-08", "BIL-07"]),
    ("What values do gift cards come in?", "From 10 to 200 euros, delivered by email [GFT-01].", ["GFT-01"]),
    ("Can I buy a gift card with another gift card?", "No [GFT-01].", ["GFT-01"]),
    ("How long is a gift card valid?", "3 years from the date of purchase [GFT-02].", ["GFT-02"]),
    ("Where do I see my gift card balance?", "In your account [GFT-02].", ["GFT-02"]),
    ("I lost my gift card code.", "The buyer can resend it from their Orders page; codes that were already redeemed cannot be replaced [GFT-03].", ["GFT-03"]),
    ("Can you replace a redeemed gift card code?", "No [GFT-03].", ["GFT-03"]),
    ("How long is the e-reader warranty?", "2 years against manufacturing defects [WAR-01].", ["WAR-01"]),
    ("Does the warranty cover a cracked screen?", "No. Water damage, cracked screens and normal battery wear are not covered [WAR-01].", ["WAR-01"]),
    ("My e-reader got wet. Is it covered?", "No, water damage is not covered by the warranty [WAR-01].", ["WAR-01"]),
    ("How do I make a warranty claim?", "Send the serial number and a description of the fault to warranty@lumenbooks.example; approved devices are repaired or replaced within 10 business days [WAR-02].", ["WAR-02"]),
    ("How long does a warranty repair take?", "Approved devices are repaired or replaced within 10 business days [WAR-02].", ["WAR-02"]),
    ("How much is the extended warranty?", "29 euros for 2 more years of cover, bought within 30 days of receiving the e-reader [WAR-03].", ["WAR-03"]),
    ("Can I buy the extended warranty six months after receiving my e-reader?", "No. It must be bought within 30 days of receiving the e-reader [WAR-03].", ["WAR-03"]),
    ("Can I return an e-reader I opened?", "Yes, within 14 days if it is in as-new condition, with a 15 euro restocking fee [WAR-04].", ["WAR-04"]),
    ("What is the restocking fee for e-readers?", "15 euros, for opened e-readers returned within 14 days [WAR-04].", ["WAR-04"]),
    ("How long do I have to return an unopened e-reader?", "30 days from delivery, for a full refund [WAR-04].", ["WAR-04"]),
    ("What personal data do you collect?", "Name, email, delivery addresses, order history and e-book reading progress; personal data is never sold [PRV-01].", ["PRV-01"]),
    ("Do you sell my data?", "No, personal data is never sold to third parties [PRV-01].", ["PRV-01"]),
    ("Do you track my reading progress?", "Yes, for e-books [PRV-01].", ["PRV-01"]),
    ("How do I get a copy of my data?", "Request it in Account settings; a download link is sent within 30 days [PRV-02].", ["PRV-02"]),
    ("How long does a data export take?", "We send the download link within 30 days [PRV-02].", ["PRV-02"]),
    ("How can I have my data deleted?", "Write to privacy@lumenbooks.example; order records are kept for 10 years as tax law requires [PRV-03].", ["PRV-03"]),
    ("Why do you keep my order history after deletion?", "Tax law requires order records to be kept for 10 years [PRV-03].", ["PRV-03"]),
    ("How do I stop marketing emails?", "Use the unsubscribe link in any email or Account settings; order and security emails are always sent [PRV-04].", ["PRV-04"]),
    ("Can I stop order confirmation emails?", "No, order and security emails are always sent [PRV-04].", ["PRV-04"]),
    ("Do you use analytics cookies?", "Only with your consent; essential cookies run the shop, and you can change your choice from the footer link [PRV-05].", ["PRV-05"]),
    ("How do I change my cookie settings?", "From the cookie banner link in the footer, at any time [PRV-05].", ["PRV-05"]),
    ("When is chat support open?", "8 am to 8 pm Central European Time, Monday to Saturday [SUP-01].", ["SUP-01"]),
    ("Is support available on Sunday?", "Chat support runs Monday to Saturday; you can email help@lumenbooks.example, answered within 2 business days [SUP-01].", ["SUP-01"]),
    ("How fast do you answer emails?", "Within 2 business days [SUP-01].", ["SUP-01"]),
    ("My e-book file will not open.", "Download it again from your library; if it still fails, support replaces the file or refunds it, even if downloaded [SUP-02].", ["SUP-02"]),
    # conditional and conflicting cases (several articles apply)
    ("My downloaded e-book is corrupted. Can I still get a refund?", "Yes. Downloaded e-books are normally not refundable [REF-02], but a file that still fails after downloading again is replaced or refunded by support [SUP-02].", ["REF-02", "SUP-02"]),
    ("I paid for a damaged book with a gift card. How am I refunded?", "Report the damage within 14 days with a photo [REF-04]; as it was paid with a gift card, the refund is gift card credit on your account [REF-07].", ["REF-04", "REF-07"]),
    ("I live in Canada and my book arrived damaged. Do I pay return shipping?", "No. For damaged items you do not need to return the item and the refund includes shipping [REF-04].", ["REF-04", "REF-06"]),
    ("I'm a Lumen Plus member. Do I pay 9 euros for express shipping?", "No. Lumen Plus includes free express shipping [BIL-06]; non-members pay 9 euros [SHP-02].", ["BIL-06", "SHP-02"]),
    ("Can I return an e-reader after 20 days if I opened it?", "No. Opened e-readers can only be returned within 14 days [WAR-04]; after that, manufacturing defects are covered by the 2-year warranty [WAR-01].", ["WAR-04", "WAR-01"]),
    ("My e-reader stopped working after 18 months. What can I do?", "It is within the 2-year warranty if it is a manufacturing defect [WAR-01]; send the serial number and fault description to warranty@lumenbooks.example [WAR-02].", ["WAR-01", "WAR-02"]),
    ("I ordered a paperback 25 days ago and have not read it. Can I still return it?", "Yes. Unread printed books can be returned within 30 days of delivery [REF-01].", ["REF-01"]),
    ("I bought an audiobook 20 days ago and barely listened. Refund?", "No. Audiobooks can only be refunded within 14 days of purchase [REF-03].", ["REF-03"]),
    ("When is my pre-order charged, and can I cancel after release?", "You are charged when it ships and can cancel for a full refund before the release date [REF-08].", ["REF-08", "BIL-02"]),
    ("I cancelled Lumen Plus after 10 days of a yearly plan. Do I keep my credits?", "The yearly fee is refunded in full when cancelled within 14 days [BIL-07], and credits expire when the membership ends [BIL-08].", ["BIL-07", "BIL-08"]),
    ("Do I need an account to use a gift card for an e-book?", "Yes; e-books need an account [ACC-01], and gift cards are accepted as payment [BIL-01].", ["ACC-01", "BIL-01"]),
    ("I want to close my account but keep my order invoices for taxes.", "Download your invoices from the Orders page first [BIL-03]; closing deletes your library after 14 days [ACC-04], while order records are kept for 10 years [PRV-03].", ["ACC-04", "BIL-03", "PRV-03"]),
    ("My order shipped to the wrong address I entered. Can you redirect it?", "No. The address cannot be changed after the order ships [SHP-06].", ["SHP-06"]),
    ("Is return shipping free for a UK customer returning an e-reader?", "Yes, return shipping is free in the UK [REF-06]; opened e-readers carry a 15 euro restocking fee [WAR-04].", ["REF-06", "WAR-04"]),
    ("Can I get a refund for a gift card I bought?", "The knowledge base does not say whether gift cards themselves can be refunded; it only says gift cards are valid for 3 years [GFT-02].", ["GFT-02"]),
    ("I'm in Spain. How long will standard delivery take and is it free for a 40 euro order?", "3 to 5 business days within the EU [SHP-01], and free because the order is over 35 euros [SHP-03].", ["SHP-01", "SHP-03"]),
    ("Will my deleted data include my reading progress?", "You can ask for deletion at privacy@lumenbooks.example [PRV-03]; reading progress is among the data collected [PRV-01], while order records stay for 10 years [PRV-03].", ["PRV-03", "PRV-01"]),
    ("How long do double-charge authorisations take to vanish, and when am I really charged?", "Temporary authorisations disappear within 7 days [BIL-04]; printed orders are charged when they ship [BIL-02].", ["BIL-04", "BIL-02"]),
    ("Can a family member use my audiobook credit?", "A Family Library shares e-books and audiobooks with up to 4 members [ACC-06]; the knowledge base does not say whether credits can be shared.", ["ACC-06"]),
    ("I received a damaged e-reader. Do I pay the restocking fee?", "No. Damaged items reported within 14 days with a photo get a free replacement or full refund [REF-04]; the 15 euro fee applies to opened returns in as-new condition [WAR-04].", ["REF-04", "WAR-04"]),
    ("My parcel to the US is lost. Who pays customs on the replacement?", "Lost parcels are replaced or refunded after the investigation [SHP-05]; customs duties outside the EU are paid by the customer [SHP-08].", ["SHP-05", "SHP-08"]),
    ("Can I buy an extended warranty for a refurbished e-reader from another shop?", "The knowledge base does not cover devices bought elsewhere; the extended warranty is sold within 30 days of receiving a Lumen e-reader [WAR-03].", ["WAR-03"]),
    ("Is my gift card still valid after two years?", "Yes. Gift cards are valid for 3 years from the date of purchase [GFT-02].", ["GFT-02"]),
    ("Do you accept bank cheques?", "No, bank cheques are not accepted [BIL-01].", ["BIL-01"]),
    ("Does the warranty cover the battery getting weaker?", "No. Normal battery wear is not covered [WAR-01].", ["WAR-01"]),
    ("Where do I report a damaged item and how long do I have?", "Report it within 14 days of delivery with a photo [REF-04]; support is reachable by chat or at help@lumenbooks.example [SUP-01].", ["REF-04", "SUP-01"]),
    ("Can I return a printed book I bought as a guest?", "Yes; unread printed books can be returned within 30 days [REF-01]. Returns can also be started by writing to returns@lumenbooks.example [REF-05].", ["REF-01", "REF-05"]),
]

UNANSWERABLE = [
    "Do you have a physical bookstore I can visit?",
    "Can I sell my used books to you?",
    "Do you offer student discounts?",
    "Can I print an e-book?",
    "Do you ship to Japan by sea freight?",
    "What is your phone number?",
    "Do you have a loyalty points program?",
    "Can I pay in bitcoin?",
    "Do you gift wrap orders?",
    "Which publishers do you work with?",
    "Can I read e-books on a Kindle?",
    "Do you offer bulk discounts for schools?",
    "Is there an app for iPhone?",
    "Can I donate books to a library through you?",
    "What is the CEO's name?",
    "Do you have job openings?",
    "Can I reserve a book that is out of stock?",
    "Do you price match other shops?",
    "Can I lend an e-book to a friend outside my family?",
    "Do you sell stationery or board games?",
    "Can I change the language of my audiobook?",
    "How do I become an affiliate partner?",
]

REFUSAL = "I'm sorry, but our knowledge base does not cover this. Please contact help@lumenbooks.example for help."


def build() -> dict:
    articles = [{"id": i, "topic": t, "title": title, "text": text} for i, t, title, text in ARTICLES]
    questions = [{"id": f"Q{n + 1:03d}", "question": q, "answer": a, "supporting_ids": ids, "answerable": True,
                  "kind": "multi" if len(ids) > 1 else "single"} for n, (q, a, ids) in enumerate(QUESTIONS)]
    offset = len(questions)
    questions += [{"id": f"Q{offset + n + 1:03d}", "question": q, "answer": REFUSAL, "supporting_ids": [],
                   "answerable": False, "kind": "unanswerable"} for n, q in enumerate(UNANSWERABLE)]
    known = {a["id"] for a in articles}
    for q in questions:
        missing = set(q["supporting_ids"]) - known
        if missing:
            raise ValueError(f"{q['id']} cites unknown articles {missing}")
    return {"company": "Lumen Books", "articles": articles, "questions": questions}


if __name__ == "__main__":
    data = build()
    path = Path(__file__).resolve().parent / "data" / "lumen_kb.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(data['articles'])} articles, {len(data['questions'])} questions -> {path}")
